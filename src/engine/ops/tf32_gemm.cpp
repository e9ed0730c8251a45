#include "engine/ops/tf32_gemm.h"

#include <string>

#include "core/error.h"

#if FLASHMACE_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "engine/kernels/split_tf32_kernels.h"
#endif

namespace flashmace {

Tf32Scope::Tf32Scope(bool on) : previous_(at::globalContext().allowTF32CuBLAS()), on_(on) {
  if (on_) at::globalContext().setAllowTF32CuBLAS(true);
}

Tf32Scope::~Tf32Scope() {
  if (on_) at::globalContext().setAllowTF32CuBLAS(previous_);
}

#if FLASHMACE_CUDA_KERNELS

namespace {

void* stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

}  // namespace

bool SplitTf32Linear::applies(const at::Tensor& weight) {
  if (weight.dim() != 2 || weight.scalar_type() != at::kFloat || !weight.is_cuda()) return false;
  return at::cuda::getDeviceProperties(weight.device().index())->major >= 8;
}

SplitTf32Linear::SplitTf32Linear(const at::Tensor& weight) {
  if (weight.dim() != 2 || weight.scalar_type() != at::kFloat || !weight.is_cuda())
    throw Error("split TF32 linear: the weights must be a float32 matrix on a CUDA device");
  const c10::cuda::CUDAGuard guard(weight.device());
  const at::Tensor w = weight.contiguous();
  const at::Tensor hi = at::empty_like(w), lo = at::empty_like(w);
  split_tf32_cuda(w.data_ptr<float>(), w.numel(), hi.data_ptr<float>(), lo.data_ptr<float>(), stream_of(w));
  stacked_ = at::cat({hi, lo, hi}, 0);
}

at::Tensor SplitTf32Linear::forward_silu(const at::Tensor& pre) const {
  const int64_t k = stacked_.size(0) / 3;
  if (pre.dim() != 2 || pre.size(1) != k || pre.scalar_type() != at::kFloat || pre.device() != stacked_.device())
    throw Error("split TF32 linear: the input must be float32 [M, " + std::to_string(k) + "] on the weights' device");
  const at::Tensor x = pre.contiguous();
  at::Tensor split = at::empty({x.size(0), 3 * k}, x.options());
  silu_split_tf32_cuda(x.data_ptr<float>(), x.size(0), k, split.data_ptr<float>(), stream_of(x));
  const Tf32Scope tf32(true);
  return at::mm(split, stacked_);
}

#else

bool SplitTf32Linear::applies(const at::Tensor&) { return false; }

SplitTf32Linear::SplitTf32Linear(const at::Tensor&) {
  throw Error("split TF32 linear: this build has no CUDA kernels");
}

at::Tensor SplitTf32Linear::forward_silu(const at::Tensor&) const {
  throw Error("split TF32 linear: this build has no CUDA kernels");
}

#endif

}  // namespace flashmace
