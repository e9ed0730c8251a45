#pragma once
// The e3nn primitives MACE uses, as plain ATen ops with autograd (mace_spec.md 3.4, 5).
// Features are [N, dim] in mul_ir layout; functions accept any float dtype and device.
#include <ATen/ATen.h>

#include <vector>

#include "core/irreps.h"

namespace flashmace {

// e3nn normalize2mom(silu) constant, a Monte-Carlo estimate, not the exact integral (spec 3.4).
constexpr double kSiluNormalization = 1.6791767923989418;
at::Tensor normalized_silu(const at::Tensor& x);

// o3.Linear(in -> out), no biases, "element" path normalisation (spec 5.1).
at::Tensor e3nn_linear(const at::Tensor& x, const at::Tensor& weight, const Irreps& in, const Irreps& out);

// The transpose of e3nn_linear: the x-gradient for the y-gradient g (it is linear in x).
at::Tensor e3nn_linear_transpose(const at::Tensor& g, const at::Tensor& weight, const Irreps& in, const Irreps& out);

// o3.FullyConnectedTensorProduct(in, Z x 0e, out) with one-hot node attributes: a per-element
// weight gather (spec 5.3). species: [N] int64 element indices.
at::Tensor element_linear(const at::Tensor& x, const at::Tensor& species, const at::Tensor& weight, const Irreps& in,
                          int num_elements, const Irreps& out);

// The transpose of element_linear: the x-gradient for the y-gradient g.
at::Tensor element_linear_transpose(const at::Tensor& g, const at::Tensor& species, const at::Tensor& weight,
                                    const Irreps& in, int num_elements, const Irreps& out);

// The "uvu" conv tensor product with per-edge weights (spec 5.2). x1: [E, dim(in1)] sender
// features, sh: [E, dim(sh)], weights: [E, layout.weight_numel]; w3j[p] is path p's coupling.
at::Tensor conv_tensor_product(const at::Tensor& x1, const at::Tensor& sh, const at::Tensor& weights, const Irreps& in1,
                               const Irreps& sh_irreps, const ConvTPLayout& layout, const std::vector<at::Tensor>& w3j);

// e3nn Gate (docs/model-format.md, "NonLinear blocks") on x laid out as Gate.irreps_in (the
// scalars, one gate per channel of each l > 0 block of `out`, those blocks): normalised silu of the
// scalars, each gated block times the normalised sigmoid of its gates. Returns [N, dim(out)].
constexpr double kSigmoidNormalization = 1.8467055342154763;  // e3nn normalize2mom(sigmoid)
at::Tensor gate(const at::Tensor& x, const Irreps& out);

// e3nn FullyConnectedNet without biases: silu-normalised hidden layers, linear last (spec 3.4).
at::Tensor radial_mlp(const at::Tensor& x, const std::vector<at::Tensor>& layers);

// Split [N, dim] into the blocks of irreps as [N, mul, 2l+1] views.
std::vector<at::Tensor> split_irreps(const at::Tensor& x, const Irreps& irreps);
// x [n, mul, d] (one mul_ir block) times w [mul, mul_out] on the channel axis -> [n, mul_out, d].
at::Tensor block_matmul(const at::Tensor& x, const at::Tensor& w);

}  // namespace flashmace
