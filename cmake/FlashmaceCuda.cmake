# flashmace's own CUDA kernels: built whenever CMake finds nvcc (check_language), also on machines
# without a GPU, for FLASHMACE_CUDA_ARCHITECTURES. Included from the top-level CMakeLists (CUDA must
# be enabled in the directory above every target that links CUDA objects); parts with .cu files may
# include it again, the guard makes that a no-op.
include_guard(GLOBAL)

option(FLASHMACE_CUDA "Build flashmace's CUDA kernels when nvcc is found" ON)
# Our own variable: LibTorch's CMake config resets CMAKE_CUDA_ARCHITECTURES to OFF.
set(FLASHMACE_CUDA_ARCHITECTURES "90" CACHE STRING "CUDA architectures of flashmace's kernels (90: H100/H200)")

set(FLASHMACE_CUDA_KERNELS OFF)
if(FLASHMACE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    # LibTorch's CMake config appends its own wheel's architecture list (down to sm_50, which nvcc 13
    # rejects) to CMAKE_CUDA_FLAGS; our targets choose theirs with FLASHMACE_CUDA_ARCHITECTURES.
    string(REGEX REPLACE "-gencode[ =]arch=[^ ]+" "" CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS}")
    find_package(CUDAToolkit REQUIRED)
    set(FLASHMACE_CUDA_KERNELS ON)
  endif()
endif()
message(STATUS "flashmace: CUDA kernels: ${FLASHMACE_CUDA_KERNELS} (architectures ${FLASHMACE_CUDA_ARCHITECTURES})")

# flashmace_cuda_kernels(<target> <sources...>): an object library of .cu files for our architectures.
function(flashmace_cuda_kernels target)
  add_library(${target} OBJECT ${ARGN})
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${FLASHMACE_CUDA_ARCHITECTURES}"
                                             CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                                             POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  target_link_libraries(${target} PUBLIC CUDA::cudart)
endfunction()
