#pragma once
// `radial spline` (pair_style keyword, opt-in): one layer's radial MLP, a function of the edge
// length only, tabulated once at load on N equal intervals of [0, r_max] as cubic Hermite pieces
// (values and slopes at the knots, computed in float64 from the model: the radial features and
// their derivative, then the MLP and its derivative forward), so a step reads the table instead of
// running the MLP's GEMMs forward and backward. The interpolation error is measured at load against
// the exact MLP (at the middle and the quarter points of every interval, where a cubic Hermite
// piece is farthest from the function) and reported; N is chosen as the smallest power of two that
// meets the dtype's tolerance unless given. The slopes the forces use are the derivatives of the
// interpolant itself, so forces stay the exact gradient of the (approximate) energy and MD conserves
// energy. Models whose radial features depend on the pair's elements (a distance transform) have no
// table over r alone and are refused. Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "engine/ops/radial_pairs.h"
#include "model/mace_params.h"

namespace flashmace {

struct RadialSplineAccuracy {
  int64_t intervals = 0;
  double value_error = 0, value_scale = 0;  // max |R_spline - R| and max |R| over the sampled lengths
  double slope_error = 0, slope_scale = 0;  // the same for dR/dr
};

class RadialSplineOp {
 public:
  // model64: the model in float64 on the CPU; folded64: fold_radial_mlp of the layer's radial MLP
  // from it. hidden_only: tabulate the last hidden activation (a reassociated first layer keeps its
  // output layer). intervals: 0 = the smallest power of two from 64 to kMaxIntervals whose measured
  // errors relative to max |R| and max |dR/dr| are within `tolerance`. The table lives in `options`
  // (the model's dtype and device).
  RadialSplineOp(const MaceParams& model64, const std::vector<at::Tensor>& folded64, bool hidden_only,
                 int64_t intervals, double tolerance, const at::TensorOptions& options);

  // R [rows, K] for the chunk's edge vectors [Ec, 3]; row u reads edge first[u] (first undefined:
  // one row per edge).
  at::Tensor forward(const at::Tensor& vectors, const at::Tensor& first) const;
  // dE/dr [rows] from dE/dR [rows, K].
  at::Tensor backward(const at::Tensor& vectors, const at::Tensor& first, const at::Tensor& grad) const;
  // gv [Ec, 3] += each edge's share of its row's dE/dr along its unit vector (pairs: index and share
  // of radial_pairs.h; null: one row per edge).
  void add_edge_gradient(const at::Tensor& vectors, const RadialPairs* pairs, const at::Tensor& dr,
                         at::Tensor& gv) const;

  const RadialSplineAccuracy& accuracy() const { return accuracy_; }
  int64_t width() const { return width_; }
  double table_bytes() const { return static_cast<double>(table_.numel() * table_.element_size()); }

  static constexpr int64_t kMaxIntervals = 4096;

 private:
  at::Tensor table_;  // CPU [N][4][K], CUDA [N][K][4] (radial_spline_kernels.h)
  int64_t width_ = 0;
  double spacing_ = 0;
  RadialSplineAccuracy accuracy_;
};

// The exact radial functions and their r-derivatives at lengths r [n] (float64, CPU): what the
// table interpolates, [n, K] each.
std::pair<at::Tensor, at::Tensor> exact_radial_functions(const MaceParams& model64,
                                                         const std::vector<at::Tensor>& folded64, bool hidden_only,
                                                         const at::Tensor& r);

}  // namespace flashmace
