# ASan + UBSan twins of flashmace targets (FLASHMACE_SANITIZE, docs/reliability.md).
#
# A twin is built beside its original in the same build dir: a sanitized library twin recompiles the
# library's sources with the sanitizer flags; an executable twin links the original's own object files
# (compiled once, unsanitized) with the sanitized library twins in front of the original libraries. The
# linker takes every symbol of a twinned library from its twin and pulls nothing of that library's
# archive; what is not twinned (the ATen glue of model/ and engine/, LibTorch, LAMMPS, MPI) comes
# from the ordinary libraries, uninstrumented. ASan still sees every heap block (malloc is intercepted
# process-wide, LibTorch's tensors included), so an instrumented kernel that reads past a tensor it
# was handed is caught. Why not a second, fully sanitized build dir: it recompiles the ATen-heavy
# sources and every test (about 10 minutes on CI's 2 cores); the twins add about one.

set(FLASHMACE_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)

# flashmace_sanitized_library(lib): OBJECT library lib_asan with lib's C++ sources, compile settings and
# dependencies, instrumented.
function(flashmace_sanitized_library lib)
  get_target_property(sources ${lib} SOURCES)
  get_target_property(dir ${lib} SOURCE_DIR)
  set(files "")
  foreach(source IN LISTS sources)
    if(source MATCHES "\\.cpp$")  # not the CUDA objects ($<TARGET_OBJECTS:...>): the archive supplies them
      if(NOT IS_ABSOLUTE "${source}")
        set(source "${dir}/${source}")
      endif()
      list(APPEND files "${source}")
    endif()
  endforeach()
  add_library(${lib}_asan OBJECT ${files})
  # Per-file options (the CPU kernels' instruction sets) live in lib's directory: copy them over, but
  # -O1 for their -O3: instrumented, each of the three conv TP kernel builds compiles in 87 s instead
  # of 200 s at -O3 on one of CI's cores, and the twins' longest test runs 329 s instead of 302.
  foreach(source IN LISTS files)
    get_source_file_property(options "${source}" DIRECTORY "${dir}" COMPILE_OPTIONS)
    if(options)
      list(TRANSFORM options REPLACE "^-O3$" "-O1")
      set_source_files_properties("${source}" TARGET_DIRECTORY ${lib}_asan PROPERTIES COMPILE_OPTIONS "${options}")
    endif()
  endforeach()
  # lib itself for its usage requirements (include dirs, definitions, those of its public
  # dependencies), then its own settings and private dependencies; an OBJECT library links nothing.
  get_target_property(dependencies ${lib} LINK_LIBRARIES)
  target_link_libraries(${lib}_asan PRIVATE ${lib} ${dependencies})
  foreach(property INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS)
    get_target_property(value ${lib} ${property})
    if(value)
      set_property(TARGET ${lib}_asan APPEND PROPERTY ${property} ${value})
    endif()
  endforeach()
  target_compile_options(${lib}_asan PRIVATE ${FLASHMACE_SANITIZE_FLAGS})
  set_target_properties(${lib}_asan PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# flashmace_sanitized_executable(exe LIBRARIES twinned...): exe_asan, exe's objects linked with the
# twins of the libraries named (made by flashmace_sanitized_library) and then exe's own libraries.
function(flashmace_sanitized_executable exe)
  cmake_parse_arguments(S "" "" "LIBRARIES" ${ARGN})
  set(objects $<TARGET_OBJECTS:${exe}>)
  foreach(lib IN LISTS S_LIBRARIES)
    list(APPEND objects $<TARGET_OBJECTS:${lib}_asan>)
  endforeach()
  add_executable(${exe}_asan ${objects})
  get_target_property(libraries ${exe} LINK_LIBRARIES)
  target_link_libraries(${exe}_asan PRIVATE ${libraries})
  target_link_options(${exe}_asan PRIVATE ${FLASHMACE_SANITIZE_FLAGS})
endfunction()
