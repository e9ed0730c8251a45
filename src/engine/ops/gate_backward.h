#pragma once
// The vector-Jacobian product of e3nn's Gate (model/e3nn_ops.h `gate`, docs/model-format.md
// "NonLinear blocks"): the fast engine's explicit backward pass through a NonLinear block's gate.
#include <ATen/ATen.h>

#include "core/irreps.h"

namespace flashmace {

// x [n, dim(gate input)]: the target's scalars, one gate per channel of each l > 0 block of `out`,
// then those blocks; grad [n, dim(out)] = dE/d(gate(x, out)). Returns dE/dx.
at::Tensor gate_backward(const at::Tensor& x, const at::Tensor& grad, const Irreps& out);

}  // namespace flashmace
