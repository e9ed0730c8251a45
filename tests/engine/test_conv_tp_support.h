#pragma once
// A conv TP problem (irreps, edges sorted by receiver, random inputs) and its reference result:
// conv_tensor_product on gathered features, index_add over receivers, autograd for the gradients.
// Shared by the conv TP tests and benchmark.
#include <ATen/ATen.h>

#include <vector>

#include "core/irreps.h"

namespace flashmace::testing {

struct ConvTPProblem {
  Irreps in1, sh;
  ConvTPLayout layout;
  int64_t nrows = 0, num_x = 0;
  at::Tensor x, xindex, Y, R;  // x [num_x, dim(in1)], xindex [E], Y [E, dim(sh)], R [E, weight_numel]
  at::Tensor receiver, row_ptr;  // [E] sorted, [nrows + 1]
  at::Tensor dagg;               // [nrows, dim(mid)] upstream gradient
};

// Edges of row r: counts[r]; xindex uniform in [0, num_x); values from `seed`, float64 on the CPU.
ConvTPProblem make_conv_tp_problem(const Irreps& in1, const Irreps& sh, const ConvTPLayout& layout,
                                   const std::vector<int64_t>& counts, int64_t num_x, uint64_t seed);

// The same problem in another dtype / on another device.
ConvTPProblem convert(const ConvTPProblem& p, const at::TensorOptions& options);

struct ConvTPReference {
  at::Tensor agg, dR, dY, dx;
};
ConvTPReference conv_tp_reference(const ConvTPProblem& p);

}  // namespace flashmace::testing
