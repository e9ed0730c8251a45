#include "engine/ops/sc_op.h"

#ifdef FLASHMACE_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include "core/cpu_isa.h"
#include "core/error.h"

namespace flashmace {

ScOp::ScOp(const ScDescriptor& d, const at::TensorOptions& options, ScExecutorKind k)
    : options_(options), out_dim_(d.out_dim), one_weight_set_(d.shared_weights) {
  const bool f64 = options.dtype() == at::kDouble;
  if (options.device().is_cpu()) {
    if (k == ScExecutorKind::Specialized)
      throw Error("sc specialized needs a CUDA device (the specialised kernels are CUDA code); on the CPU use "
                  "sc auto or sc generic");
    if (f64)
      cpu64_ = std::make_unique<ScCpuExecutor<double>>(d);
    else
      cpu32_ = std::make_unique<ScCpuExecutor<float>>(d);
    name_ = std::string("cpu generic ") + cpu_isa_name(cpu_isa());  // (the loops' instruction set)
    return;
  }
#ifdef FLASHMACE_TORCH_CUDA
  // The executors load modules into the current context: make LibTorch's primary context current.
  const c10::cuda::CUDAGuard guard(options.device());
  (void)at::zeros({1}, options);
  if (f64) {
    cuda64_ = make_cuda_sc_executor<double>(d, k);
    name_ = cuda64_->name();
  } else {
    cuda32_ = make_cuda_sc_executor<float>(d, k);
    name_ = cuda32_->name();
  }
#else
  throw Error("This flashmace was built without CUDA support in LibTorch: no SC executor for " +
              options.device().str());
#endif
}

ScOp::~ScOp() = default;
ScOp::ScOp(ScOp&&) noexcept = default;

namespace {

#ifdef FLASHMACE_TORCH_CUDA
void* current_stream(const at::Tensor& t) { return at::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
#endif

}  // namespace

at::Tensor ScOp::weight_sets(const at::Tensor& species) const {
  return one_weight_set_ ? at::zeros_like(species) : species.contiguous();
}

at::Tensor ScOp::forward(const at::Tensor& a_in, const at::Tensor& species_in) const {
  const at::Tensor a = a_in.contiguous(), species = weight_sets(species_in);
  const int64_t n = a.size(0);
  at::Tensor b = at::empty({n, out_dim_}, options_);
  if (n == 0) return b;
  if (cpu64_) cpu64_->forward(a.data_ptr<double>(), species.data_ptr<int64_t>(), n, b.data_ptr<double>());
  if (cpu32_) cpu32_->forward(a.data_ptr<float>(), species.data_ptr<int64_t>(), n, b.data_ptr<float>());
#ifdef FLASHMACE_TORCH_CUDA
  if (cuda64_ || cuda32_) {
    const c10::cuda::CUDAGuard guard(a.device());
    if (cuda64_)
      cuda64_->forward(a.data_ptr<double>(), species.data_ptr<int64_t>(), n, b.data_ptr<double>(), current_stream(a));
    if (cuda32_)
      cuda32_->forward(a.data_ptr<float>(), species.data_ptr<int64_t>(), n, b.data_ptr<float>(), current_stream(a));
  }
#endif
  return b;
}

at::Tensor ScOp::backward(const at::Tensor& a_in, const at::Tensor& species_in, const at::Tensor& grad_in) const {
  const at::Tensor a = a_in.contiguous(), species = weight_sets(species_in), g = grad_in.contiguous();
  const int64_t n = a.size(0);
  at::Tensor da = at::empty_like(a);
  if (n == 0) return da;
  if (cpu64_)
    cpu64_->backward(a.data_ptr<double>(), species.data_ptr<int64_t>(), g.data_ptr<double>(), n, da.data_ptr<double>());
  if (cpu32_)
    cpu32_->backward(a.data_ptr<float>(), species.data_ptr<int64_t>(), g.data_ptr<float>(), n, da.data_ptr<float>());
#ifdef FLASHMACE_TORCH_CUDA
  if (cuda64_ || cuda32_) {
    const c10::cuda::CUDAGuard guard(a.device());
    if (cuda64_)
      cuda64_->backward(a.data_ptr<double>(), species.data_ptr<int64_t>(), g.data_ptr<double>(), n,
                        da.data_ptr<double>(), current_stream(a));
    if (cuda32_)
      cuda32_->backward(a.data_ptr<float>(), species.data_ptr<int64_t>(), g.data_ptr<float>(), n, da.data_ptr<float>(),
                        current_stream(a));
  }
#endif
  return da;
}

}  // namespace flashmace
