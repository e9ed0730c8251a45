#pragma once
// The first interaction reassociated (DESIGN.md; what FastMACE does per sender species): its input
// features depend only on the sender's species, x[z, u], and every path is scalar x spherical
// harmonic (d1 = 1), so with R[e, p, u] = sum_k h[e, k] W[k, p, u] (h the radial MLP's last hidden
// layer, W its output layer)
//   agg[row, p, u, m3] = sum_z x[z, u] sum_k W[k, p, u] sum_m2 C_p[m2, m3] S[row, z, k, y_p + m2],
//   S[row, z, k, j]    = sum over the row's edges from species z of h[e, k] Y[e, j].
// The [E, weight_numel] radial output and the per-edge tensor product never exist: per edge only
// h (x) Y is summed (species_outer_kernels.h), the rest is per row: one kernel each way on CUDA
// (first_layer_kernels.h), GEMMs over rows x species on the CPU (and on CUDA for block sizes the
// kernels do not take).
// Exact: the same sums in another order. Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include <vector>

#include "engine/kernels/conv_tp_descriptor.h"

namespace flashmace {

template <typename T>
struct FirstLayerArgs;

class FirstLayerOp {
 public:
  // Whether a layer with this descriptor can be reassociated: every path has a scalar input (d1 = 1).
  static bool applies(const ConvTPDescriptor& d);
  // w_out: the radial MLP's output layer [H, weight_numel] (folded, edge_terms.h).
  FirstLayerOp(const ConvTPDescriptor& d, const at::Tensor& w_out);

  // h [E, H], Y [E, dim(sh)], slot [E] (sender species slot), row_ptr [nrows + 1] -> S [nrows, Z, H, dim(sh)].
  // With h_index [E], h is [any, H] and edge e uses row h_index[e] (rows shared by reverse-edge pairs).
  at::Tensor sums(const at::Tensor& h, const at::Tensor& Y, const at::Tensor& slot, const at::Tensor& row_ptr,
                  int64_t nrows, int64_t Z, const at::Tensor& h_index = {}) const;
  // S and the per-slot features x [Z, dim(in1)] -> agg [nrows, dim(mid)]
  at::Tensor aggregate(const at::Tensor& S, const at::Tensor& x) const;
  // d(agg) -> dS
  at::Tensor aggregate_backward(const at::Tensor& dagg, const at::Tensor& x, int64_t hidden) const;
  // dS -> (dh [E, H] per edge, dY [E, dim(sh)])
  std::pair<at::Tensor, at::Tensor> sums_backward(const at::Tensor& dS, const at::Tensor& h, const at::Tensor& Y,
                                                  const at::Tensor& slot, const at::Tensor& row_ptr,
                                                  const at::Tensor& h_index = {}) const;

 private:
  template <typename T>
  FirstLayerArgs<T> device_args(const at::Tensor& x, int64_t nrows) const;

  ConvTPDescriptor d_;
  at::Tensor w_out_;
  std::vector<at::Tensor> c_;  // per path: C_p [d2, d3] with alpha, in the dtype and on the device
  // CUDA: the paths (FirstLayerPath) followed by the entries' (m2, m3) as int32, the entries'
  // alpha * c in the dtype, and w_out transposed, on the device; whether the kernels take the
  // layer (else the ATen formulation runs on the GPU too), and whether some harmonic is unread.
  at::Tensor device_paths_, device_entry_c_, w_out_t_;
  bool forward_kernel_ = false, backward_kernel_ = false, zero_unread_harmonics_ = false;
  int max_mul_ = 0;  // largest path multiplicity
};

}  // namespace flashmace
