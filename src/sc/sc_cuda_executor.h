#pragma once
// SC executors on a CUDA GPU, behind one CUDA-free interface (plain device pointers and a stream
// handle), so callers compile no CUDA headers.
//   specialized: the kernels of sc_codegen.h, compiled by NVRTC for the current GPU (through the
//                disk cache, jit/nvrtc.h) and loaded with the driver API, which is itself loaded at
//                run time (libcuda exists only on GPU machines).
//   generic:     one precompiled kernel that reads the descriptor's terms from device tables; it
//                exists when flashmace was built with the CUDA toolkit (FLASHMACE_SC_CUDA).
// Both act on the current device and its current context (LibTorch's, in the engine) and need
// its device pointers; layouts are those of ScCpuExecutor. Calls are asynchronous on `stream` (a
// cudaStream_t / CUstream; nullptr = legacy default stream) and never synchronise. An element
// index outside [0, Z) makes that atom's outputs NaN (the device cannot throw).
#include <cstdint>
#include <memory>
#include <string>

#include "sc/sc_descriptor.h"
#include "sc/sc_executor_kind.h"

namespace flashmace {

template <typename T>
class ScCudaExecutor {
 public:
  virtual ~ScCudaExecutor() = default;
  virtual void forward(const T* A, const int64_t* species, int64_t n, T* B, void* stream) const = 0;
  virtual void backward(const T* A, const int64_t* species, const T* dB, int64_t n, T* dA, void* stream) const = 0;
  virtual std::string name() const = 0;  // "specialized sm_90", "generic"
};


// Auto: the specialised executor when it can be made, else (logged once) the generic one.
// Specialized / Generic: that one, or a flashmace::Error saying why not.
template <typename T>
std::unique_ptr<ScCudaExecutor<T>> make_cuda_sc_executor(const ScDescriptor& d, ScExecutorKind kind);

// The two constructors behind it; nullptr with *why_not set when not possible here.
template <typename T>
std::unique_ptr<ScCudaExecutor<T>> make_specialized_cuda_sc(const ScDescriptor& d, std::string* why_not);
template <typename T>
std::unique_ptr<ScCudaExecutor<T>> make_generic_cuda_sc(const ScDescriptor& d, std::string* why_not);

}  // namespace flashmace
