# LibTorch from the Python torch package (torch.utils.cmake_prefix_path), so that one code base
# builds against the pinned PyPI wheel here and against the preinstalled PyTorch on the GPU box.
execute_process(
  COMMAND "${FLASHMACE_PYTHON}" -c "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.__version__)"
  OUTPUT_VARIABLE _torch_out RESULT_VARIABLE _torch_rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "flashmace needs LibTorch from the Python torch package, but '${FLASHMACE_PYTHON}' "
                      "cannot import torch. Run tools/install_deps.sh, or pass -DFLASHMACE_PYTHON=<python with torch>.")
endif()
string(REPLACE "\n" ";" _torch_out "${_torch_out}")
list(GET _torch_out 0 _torch_prefix)
list(GET _torch_out 1 FLASHMACE_TORCH_VERSION)
list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
find_package(Torch REQUIRED)
message(STATUS "flashmace: torch ${FLASHMACE_TORCH_VERSION} from ${_torch_prefix}")

add_library(flashmace_torch INTERFACE)
target_link_libraries(flashmace_torch INTERFACE ${TORCH_LIBRARIES})
# Torch's own headers as SYSTEM so -Wall -Wextra speaks only about our code.
target_include_directories(flashmace_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_compile_options(flashmace_torch INTERFACE ${TORCH_CXX_FLAGS})

# LibTorch runs on the shared C++ runtime. A toolchain whose libstdc++ comes only as an archive
# (no libstdc++.so beside g++) would link a second, static runtime into our binaries; inside a
# module loaded next to LibTorch (the Python extension, the LAMMPS plugins) the two copies disagree
# on the locale tables and the first formatted number crashes. Link the shared one by soname then.
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so OUTPUT_VARIABLE _flashmace_libstdcxx
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT IS_ABSOLUTE "${_flashmace_libstdcxx}")
  message(STATUS "flashmace: ${CMAKE_CXX_COMPILER} has no shared libstdc++.so; linking libstdc++.so.6 by soname")
  target_link_libraries(flashmace_torch INTERFACE -l:libstdc++.so.6)
endif()

# LibTorch built with CUDA (the PyPI wheel is, even on machines without a GPU): device code paths
# such as allocator statistics compile in; they are used only when a GPU is present at run time.
if(C10_CUDA_LIBRARY)
  set(FLASHMACE_TORCH_CUDA ON)
  target_compile_definitions(flashmace_torch INTERFACE FLASHMACE_TORCH_CUDA=1)
endif()
message(STATUS "flashmace: LibTorch with CUDA: ${FLASHMACE_TORCH_CUDA}")
