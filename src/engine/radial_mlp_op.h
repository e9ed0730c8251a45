#pragma once
// The radial MLP's hidden layers for the message stage: the fused CUDA kernels of
// radial_mlp_kernels.h where they apply (float32 CUDA tensors, every width <= kRadialMlpMaxWidth),
// the GEMM-and-silu code of edge_terms.h otherwise. The same results up to rounding. Internal to the
// fast engine (ATen).
#include <ATen/ATen.h>

#include <vector>

#include "engine/radial_pairs.h"

namespace flashmace {

// Whether the fused kernels run this MLP (folded, edge_terms.h) on tensors like `ef`.
bool fused_radial_mlp(const std::vector<at::Tensor>& folded, const at::Tensor& ef);

// The last hidden activation [R, H] of rows `index` of ef (all rows when undefined); `pre` receives
// the pre-activations the vjp needs.
at::Tensor radial_mlp_hidden_rows(const std::vector<at::Tensor>& folded, const at::Tensor& ef,
                                  const at::Tensor& index, std::vector<at::Tensor>* pre);

// d(ef) [R, n_basis] per row from dE/d(hidden): per row [R, H], or, with `pairs`, per edge [E, H],
// summed over each pair's two edges first (sum_pair_rows' order).
at::Tensor radial_mlp_hidden_vjp_rows(const std::vector<at::Tensor>& folded, const std::vector<at::Tensor>& pre,
                                      const at::Tensor& grad_hidden, const RadialPairs* pairs);

}  // namespace flashmace
