#pragma once
// The radial MLP's hidden layers for the message stage, built once per layer: the fused CUDA
// kernels of radial_mlp_kernels.h where they apply (float32 weights on a CUDA device, every width
// <= kRadialMlpMaxWidth), the GEMM-and-silu code of edge_terms.h otherwise. The same results up to
// rounding. Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include <vector>

#include "engine/radial_pairs.h"

namespace flashmace {

class RadialMlp {
 public:
  RadialMlp() = default;
  // folded: fold_radial_mlp of the layer's MLP, the output layer last (not run here).
  explicit RadialMlp(std::vector<at::Tensor> folded);

  bool fused() const { return table_.defined(); }
  const std::vector<at::Tensor>& folded() const { return folded_; }

  // The last hidden activation [R, H] of rows `index` of ef (all rows when undefined); `pre`
  // receives the pre-activations the vjp needs (with the fused kernels: [R, 64]-strided views).
  at::Tensor hidden(const at::Tensor& ef, const at::Tensor& index, std::vector<at::Tensor>* pre) const;

  // d(ef) [R, n_basis] per row from dE/d(hidden): per row [R, H], or, with `pairs`, per edge [E, H],
  // summed over each pair's two edges first (sum_pair_rows' order).
  at::Tensor hidden_vjp(const std::vector<at::Tensor>& pre, const at::Tensor& grad_hidden,
                        const RadialPairs* pairs) const;

 private:
  std::vector<at::Tensor> folded_;
  at::Tensor table_;  // the fused kernels' padded weights and their transposes (undefined: GEMMs)
};

}  // namespace flashmace
