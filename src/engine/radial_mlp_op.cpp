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

RadialMlpArgs args_of(const std::vector<at::Tensor>& folded, int64_t rows) {
  RadialMlpArgs a;
  a.layers = static_cast<int>(folded.size()) - 1;
  a.width[0] = static_cast<int>(folded[0].size(0));
  for (int l = 0; l < a.layers; ++l) {
    a.width[l + 1] = static_cast<int>(folded[l].size(1));
    a.weight[l] = folded[l].data_ptr<float>();
  }
  a.rows = rows;
  return a;
}

#if FLASHMACE_CUDA_KERNELS
void* stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
#endif

}  // namespace

bool fused_radial_mlp(const std::vector<at::Tensor>& folded, const at::Tensor& ef) {
#if FLASHMACE_CUDA_KERNELS
  const int layers = static_cast<int>(folded.size()) - 1;
  if (!ef.is_cuda() || layers < 1 || layers > kRadialMlpMaxLayers) return false;
  if (ef.scalar_type() != at::kFloat) return false;
  for (int l = 0; l < layers; ++l)
    if (folded[l].size(0) > kRadialMlpMaxWidth || folded[l].size(1) > kRadialMlpMaxWidth ||
        !folded[l].is_contiguous() || folded[l].scalar_type() != at::kFloat)
      return false;
  return true;
#else
  (void)folded;
  (void)ef;
  return false;
#endif
}

at::Tensor radial_mlp_hidden_rows(const std::vector<at::Tensor>& folded, const at::Tensor& ef,
                                  const at::Tensor& index, std::vector<at::Tensor>* pre) {
  if (!fused_radial_mlp(folded, ef))
    return radial_mlp_hidden(folded, index.defined() ? ef.index_select(0, index) : ef, pre);
#if FLASHMACE_CUDA_KERNELS
  const int64_t rows = index.defined() ? index.size(0) : ef.size(0);
  const at::Tensor efc = ef.contiguous();
  const at::Tensor ic = index.defined() ? index.contiguous() : at::Tensor();
  pre->clear();
  for (std::size_t l = 0; l + 1 < folded.size(); ++l) pre->push_back(at::empty({rows, folded[l].size(1)}, ef.options()));
  at::Tensor h = at::empty({rows, folded[folded.size() - 2].size(1)}, ef.options());
  const c10::cuda::CUDAGuard guard(ef.device());
  std::vector<float*> p;
  for (at::Tensor& t : *pre) p.push_back(t.data_ptr<float>());
  radial_mlp_forward_cuda(args_of(folded, rows), efc.data_ptr<float>(), ic.defined() ? ic.data_ptr<int64_t>() : nullptr,
                          p.data(), h.data_ptr<float>(), stream_of(ef));
  return h;
#else
  throw Error("radial MLP: no fused kernels in this build");
#endif
}

at::Tensor radial_mlp_hidden_vjp_rows(const std::vector<at::Tensor>& folded, const std::vector<at::Tensor>& pre,
                                      const at::Tensor& grad_hidden, const RadialPairs* pairs) {
  if (!fused_radial_mlp(folded, grad_hidden))
    return radial_mlp_hidden_vjp(folded, pre, pairs ? sum_pair_rows(*pairs, grad_hidden) : grad_hidden);
#if FLASHMACE_CUDA_KERNELS
  const int64_t rows = pairs ? pairs->first.size(0) : grad_hidden.size(0);
  if (pre.size() + 1 != folded.size() || (!pre.empty() && pre[0].size(0) != rows))
    throw Error("radial MLP: the pre-activations do not match the rows of the gradient");
  const at::Tensor g = grad_hidden.contiguous();
  at::Tensor d_ef = at::empty({rows, folded[0].size(0)}, grad_hidden.options());
  const c10::cuda::CUDAGuard guard(g.device());
  std::vector<const float*> p;
  for (const at::Tensor& t : pre) p.push_back(t.data_ptr<float>());
  radial_mlp_vjp_cuda(args_of(folded, rows), p.data(), g.data_ptr<float>(),
                      pairs ? pairs->first.data_ptr<int64_t>() : nullptr,
                      pairs ? pairs->second.data_ptr<int64_t>() : nullptr, d_ef.data_ptr<float>(), stream_of(g));
  return d_ef;
#else
  throw Error("radial MLP: no fused kernels in this build");
#endif
}

}  // namespace flashmace
