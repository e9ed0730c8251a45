#pragma once
// For the engine's .cu files only (CUDA runtime header): the check after a kernel launch, naming
// the kernel family and the kernel in the error.
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace flashmace {

inline void check_cuda_launch(const char* family, const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(std::string(family) + ": CUDA kernel " + kernel + " failed to launch: " + cudaGetErrorString(err));
}

}  // namespace flashmace
