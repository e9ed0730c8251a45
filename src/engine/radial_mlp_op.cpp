#include "engine/radial_mlp_op.h"

#include "core/error.h"
#include "engine/edge_terms.h"
#include "engine/radial_mlp_kernels.h"

#if FLASHMACE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmace {

namespace {

constexpr int64_t kW = kRadialMlpMaxWidth;

int hidden_layers(const std::vector<at::Tensor>& folded) { return static_cast<int>(folded.size()) - 1; }

#if FLASHMACE_CUDA_KERNELS
bool kernels_apply(const std::vector<at::Tensor>& folded) {
  const int layers = hidden_layers(folded);
  if (layers < 1 || layers > kRadialMlpMaxLayers) return false;
  for (int l = 0; l < layers; ++l)
    if (!folded[l].is_cuda() || folded[l].scalar_type() != at::kFloat || folded[l].size(0) > kW ||
        folded[l].size(1) > kW)
      return false;
  return true;
}

void* stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
#endif

}  // namespace

RadialMlp::RadialMlp(std::vector<at::Tensor> folded) : folded_(std::move(folded)) {
#if FLASHMACE_CUDA_KERNELS
  if (!kernels_apply(folded_)) return;
  const int64_t L = hidden_layers(folded_);
  table_ = at::zeros({2 * L, kW, kW}, folded_[0].options());
  for (int64_t l = 0; l < L; ++l) {
    const at::Tensor& w = folded_[l];
    table_[l].narrow(0, 0, w.size(0)).narrow(1, 0, w.size(1)).copy_(w);
    table_[L + l].narrow(0, 0, w.size(1)).narrow(1, 0, w.size(0)).copy_(w.t());
  }
#endif
}

at::Tensor RadialMlp::hidden(const at::Tensor& ef, const at::Tensor& index, std::vector<at::Tensor>* pre) const {
  if (!fused()) return radial_mlp_hidden(folded_, index.defined() ? ef.index_select(0, index) : ef, pre);
#if FLASHMACE_CUDA_KERNELS
  const int L = hidden_layers(folded_);
  const int64_t rows = index.defined() ? index.size(0) : ef.size(0);
  if (ef.scalar_type() != at::kFloat || ef.device() != table_.device() || ef.size(1) != folded_[0].size(0) ||
      ef.stride(1) != 1)
    throw Error("radial MLP: ef must be float32 rows of the basis width on the MLP's device");
  const at::Tensor ic = index.defined() ? index.contiguous() : at::Tensor();
  RadialMlpArgs a;
  a.layers = L;
  a.width[0] = static_cast<int>(folded_[0].size(0));
  for (int l = 0; l < L; ++l) a.width[l + 1] = static_cast<int>(folded_[l].size(1));
  a.table = table_.data_ptr<float>();
  a.rows = rows;
  a.ef_stride = ef.stride(0);
  pre->clear();
  std::vector<float*> p;
  for (int l = 0; l < L; ++l) {
    const at::Tensor t = at::empty({rows, kW}, ef.options());
    p.push_back(t.data_ptr<float>());
    pre->push_back(t.narrow(1, 0, a.width[l + 1]));
  }
  const at::Tensor h = at::empty({rows, kW}, ef.options());
  const c10::cuda::CUDAGuard guard(ef.device());
  radial_mlp_forward_cuda(a, ef.data_ptr<float>(), ic.defined() ? ic.data_ptr<int64_t>() : nullptr, p.data(),
                          h.data_ptr<float>(), stream_of(ef));
  return h.narrow(1, 0, a.width[L]);
#else
  throw Error("radial MLP: no fused kernels in this build");
#endif
}

at::Tensor RadialMlp::hidden_vjp(const std::vector<at::Tensor>& pre, const at::Tensor& grad_hidden,
                                 const RadialPairs* pairs) const {
  if (!fused()) return radial_mlp_hidden_vjp(folded_, pre, pairs ? sum_pair_rows(*pairs, grad_hidden) : grad_hidden);
#if FLASHMACE_CUDA_KERNELS
  const int L = hidden_layers(folded_);
  const int64_t rows = pairs ? pairs->first.size(0) : grad_hidden.size(0);
  if (static_cast<int>(pre.size()) != L || pre[0].size(0) != rows || pre[0].stride(0) != kW)
    throw Error("radial MLP: the pre-activations are not the fused forward's for these rows");
  const at::Tensor g = grad_hidden.stride(1) == 1 ? grad_hidden : grad_hidden.contiguous();
  if (g.scalar_type() != at::kFloat || g.size(1) != folded_[L - 1].size(1))
    throw Error("radial MLP: the gradient must be float32 rows of the last hidden width");
  RadialMlpArgs a;
  a.layers = L;
  a.width[0] = static_cast<int>(folded_[0].size(0));
  for (int l = 0; l < L; ++l) a.width[l + 1] = static_cast<int>(folded_[l].size(1));
  a.table = table_.data_ptr<float>();
  a.rows = rows;
  a.grad_stride = g.stride(0);
  std::vector<const float*> p;
  for (const at::Tensor& t : pre) p.push_back(t.data_ptr<float>());
  at::Tensor d_ef = at::empty({rows, a.width[0]}, g.options());
  const c10::cuda::CUDAGuard guard(g.device());
  radial_mlp_vjp_cuda(a, p.data(), g.data_ptr<float>(), pairs ? pairs->first.data_ptr<int64_t>() : nullptr,
                      pairs ? pairs->second.data_ptr<int64_t>() : nullptr, d_ef.data_ptr<float>(), stream_of(g));
  return d_ef;
#else
  throw Error("radial MLP: no fused kernels in this build");
#endif
}

}  // namespace flashmace
