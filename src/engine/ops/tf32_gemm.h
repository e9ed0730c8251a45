#pragma once
// TF32 tensor cores for float32 GEMMs on CUDA (EngineOptions::tf32). Tf32Scope lets cuBLAS use
// plain TF32 while it lives (tf32 yes: ~3e-4 relative error per GEMM). SplitTf32Linear runs a fixed
// layer SiLU(pre) W as one TF32 GEMM over split operands (kernels/split_tf32_kernels.h), to
// float32's accuracy: the radial MLP's output layer under tf32 auto, where on FP32 cores its GEMM
// is compute-bound (K = 64 inputs, N = paths x channels outputs per edge). Internal to the fast
// engine (ATen).
#include <ATen/ATen.h>

namespace flashmace {

// cuBLAS may use TF32 for float32 GEMMs while this lives (when on), as before afterwards.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool on);
  ~Tf32Scope();
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool previous_, on_;
};

class SplitTf32Linear {
 public:
  // Whether W [K, N] runs here with profit: float32 on a CUDA device with TF32 tensor cores
  // (compute capability 8.0 or newer) in a build with flashmace's CUDA kernels.
  static bool applies(const at::Tensor& weight);

  explicit SplitTf32Linear(const at::Tensor& weight);  // W [K, N], split once here

  // SiLU(pre) W [M, N] from pre [M, K].
  at::Tensor forward_silu(const at::Tensor& pre) const;

 private:
  at::Tensor stacked_;  // [W_hi ; W_lo ; W_hi] [3K, N]
};

}  // namespace flashmace
