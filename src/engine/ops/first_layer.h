#pragma once
// The first interaction reassociated (DESIGN.md; what FastMACE does per sender species): its input
// features depend only on the sender's species, x[z, u], and every path is scalar x spherical
// harmonic -> the harmonic's own irrep (0 x l -> l, whose Wigner-3j is diagonal), so with
// R[e, p, u] = sum_k h[e, k] W[k, p, u] (h the radial MLP's last hidden layer, W its output layer)
// and c_p[m] the path's alpha times the Wigner-3j's (m, m) entry,
//   agg[row, p, u, m]  = c_p[m] sum_{z, k} S[y_p + m, row, z, k] W'_p[z k, u],  W'_p[z k, u] = x[z, u] W[k, p, u]
//   S[j, row, z, k]    = sum over the row's edges from species z of h[e, k] Y[e, j].
// The [E, weight_numel] radial output and the per-edge tensor product never exist: per edge only
// h (x) Y is summed (species_outer_kernels.h); per row each path is one GEMM of its harmonics'
// [2l+1 rows, Z H] block of S with W'_p (cuBLAS / MKL: tensor cores on CUDA in float64, the FP32
// units in float32), and the backward the transposed GEMMs into dS.
// Exact: the same sums in another order. Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include <vector>

#include "engine/kernels/conv_tp_descriptor.h"
#include "engine/ops/irreps_linear.h"

namespace flashmace {

class FirstLayerOp {
 public:
  // Whether a layer with this descriptor can be reassociated: every path is 0 x l -> l (diagonal).
  static bool applies(const ConvTPDescriptor& d);
  // w_out: the radial MLP's output layer [H, weight_numel] (folded, edge_terms.h).
  FirstLayerOp(const ConvTPDescriptor& d, const at::Tensor& w_out);

  // h [E, H], Y [E, dim(sh)], slot [E] (sender species slot), row_ptr [nrows + 1] -> S [dim(sh), nrows, Z, H].
  // With h_index [E], h is [any, H] and edge e uses row h_index[e] (rows shared by reverse-edge pairs).
  at::Tensor sums(const at::Tensor& h, const at::Tensor& Y, const at::Tensor& slot, const at::Tensor& row_ptr,
                  int64_t nrows, int64_t Z, const at::Tensor& h_index = {}) const;
  // S and the per-slot features x [Z, dim(in1)] -> agg [nrows, dim(mid)]
  at::Tensor aggregate(const at::Tensor& S, const at::Tensor& x) const;
  // d(agg) -> dS
  at::Tensor aggregate_backward(const at::Tensor& dagg, const at::Tensor& x, int64_t hidden) const;

  // The layer's projection (the linear after the message sum, mid -> target) folded in: each path
  // is one GEMM from its harmonics' block of S straight to its projected columns,
  //   y[row, v, m] (+)= sum_{z k} S[y_p + m, row, z, k] B_p[z k, v],  B_p = c_p W'_p P_p,
  // P_p the projection's weight rows of the path's mid block and c_p the path's coupling, which
  // must be the same for all m (for 0 x l -> l it is alpha / sqrt(2l + 1)). The [rows, dim(mid)]
  // aggregate, the projection's own GEMMs and the transposes between the two never exist. Returns
  // false, folding nothing, if some path's coupling differs between its m.
  bool fold_projection(const IrrepsLinear& project);
  bool folds_projection() const { return folded_projection_; }
  // S and x -> the projected sums, written into y [nrows, dim(target)] (any row stride) or added to it.
  void project_into(const at::Tensor& S, const at::Tensor& x, const at::Tensor& y, bool accumulate) const;
  // d(projected sums) [nrows, dim(target)] -> dS
  at::Tensor project_backward(const at::Tensor& dy, const at::Tensor& x, int64_t hidden) const;

  // dS -> (dh [E, H] per edge, dY [E, dim(sh)])
  std::pair<at::Tensor, at::Tensor> sums_backward(const at::Tensor& dS, const at::Tensor& h, const at::Tensor& Y,
                                                  const at::Tensor& slot, const at::Tensor& row_ptr,
                                                  const at::Tensor& h_index = {}) const;

 private:
  // W'[z k, w] for every path's columns w: [Z H, weight_numel].
  at::Tensor slot_weights(const at::Tensor& x) const;
  // B_p [Z H, out mul] of every folded path, in folded_ order.
  std::vector<at::Tensor> projected_weights(const at::Tensor& x) const;

  // A path with the projection folded in: the output block it reads into and c_p P_p [mul, out mul].
  struct FoldedPath {
    int path = 0;  // index into d_.paths
    int64_t out_offset = 0, out_mul = 0;
    bool first_writer = true;  // the first folded path to write its output block
    at::Tensor weight;
  };

  ConvTPDescriptor d_;
  at::Tensor w_out_;
  at::Tensor x_column_;                // per weight column, the column of x it multiplies [weight_numel] (int64)
  std::vector<at::Tensor> coupling_;  // per path: c_p[m] = alpha times the Wigner-3j's (m, m) entry [2l + 1]
  bool some_harmonic_unread_ = false;  // (its dS rows are zero: no path writes them)
  std::vector<double> uniform_coupling_;  // per path: c_p if equal for all m (to 1e-14), else NaN

  bool folded_projection_ = false;
  bool out_ir_mul_ = false;  // the projection writes its target in ir_mul (irreps_linear.h)
  std::vector<FoldedPath> folded_;
  at::Tensor folded_stack_;               // [paths, mul, out mul] where every path folds alike (one bmm), else undefined
  bool folded_cover_every_column_ = false;  // whether the folded paths write every projected column
  bool some_harmonic_unprojected_ = false;  // (dS rows no folded path writes are zero)
};

}  // namespace flashmace
