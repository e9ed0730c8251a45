#pragma once
// The per-row and per-edge conv TP kernels of conv_tp_cpu.cpp, compiled once per instruction set into the
// namespaces cpu_portable, cpu_avx2 and cpu_avx512 (conv_tp_cpu_rows_impl.h). Inputs and outputs in
// the channel-innermost layout [m][u] of each irreps block (conv_tp_cpu.cpp transposes):
//   forward_row:  out_mu[dim_mid] += sum over the row's edges of TP(x[xindex[e]], Y[e], R[e]), in blocks
//                 of kConvTPEdgeBlock edges (m: scratch of kConvTPEdgeBlock * cm.size values)
//   backward_row: for each of the row's edges, from one sweep over its inputs (ConvTPBackwardPass): dY[e]
//                 written, its dR written or added, its dx added into the window of x rows
//   x_grad_row:   dx_mu[dim_in1] += the gradient of every edge of CSR row `xr` (x_perm order)
// xt: [num_x, dim_in1] and gt: [nrows, dim_mid] transposed; m: scratch of cm.size values (forward_row:
// kConvTPEdgeBlock * cm.size).
#include <cstdint>

#include "engine/kernels/conv_tp_kernels.h"

namespace flashmace {

// Every path's coupling of input to output components for one edge, as a linear map of the edge's Y:
// M = sum_b Y[b] c[b], where path i's M[a][m3] (d1 x d3, at offset[i] + a * d3 + m3) is the sum of its
// Wigner-3j terms c * Y[b] for (a, b -> m3). TP(x_u, Y)[m3] = sum_a M[a][m3] x_u[a].
template <typename T>
struct ConvTPCouplings {
  const T* c = nullptr;             // [dim_sh][size]
  const int32_t* offset = nullptr;  // [num_paths]
  int size = 0;                     // sum of d1 * d3 over the paths, padded to a multiple of 16
};

// The edges whose couplings forward_row holds at once: their R and x rows stay in the core's cache while
// every path's tiles sweep over them, each tile's sums in registers.
constexpr int kConvTPEdgeBlock = 32;

// The row-major backward's view of its outputs (conv_tp_cpu.cpp). rank: each edge's place among the
// edges of its radial row (null: every edge 0); dr_slot: null, or per edge -1 (its dR goes to dR's row:
// written by rank 0, added by the others in edge order) or the row of `waiting` where its dR is written,
// to be added to dR's row later in edge order (an edge whose radial row's earlier edges belong to
// another thread). dR's row is the radial row (dr_by_radial_row) or the edge's. dx: null, or a window of
// x rows from x_begin in the [m][u] layout, where every edge's dx is added in edge order.
template <typename T>
struct ConvTPBackwardPass {
  const int32_t* rank = nullptr;
  const int64_t* dr_slot = nullptr;
  T* waiting = nullptr;  // [slots, weight_numel]
  bool dr_by_radial_row = false;
  T* dx = nullptr;
  int64_t x_begin = 0;
};

#define FLASHMACE_CONV_TP_CPU_ROWS(T)                                                                        \
  void conv_tp_forward_row(const ConvTPTables<T>& t, const ConvTPCouplings<T>& cm, const ConvTPEdges<T>& g, \
                           const T* xt, int64_t row, T* out_mu, T* m);                                      \
  void conv_tp_x_grad_row(const ConvTPTables<T>& t, const ConvTPCouplings<T>& cm, const ConvTPEdges<T>& g,  \
                          const ConvTPGradients<T>& d, const T* gt, int64_t xr, T* dx_mu, T* m);      \
  void conv_tp_backward_row(const ConvTPTables<T>& t, const ConvTPCouplings<T>& cm, const ConvTPEdges<T>& g, \
                            const ConvTPGradients<T>& d, const T* xt, const T* gt, int64_t row,             \
                            const ConvTPBackwardPass<T>& pass, T* m);

namespace cpu_portable {
FLASHMACE_CONV_TP_CPU_ROWS(float)
FLASHMACE_CONV_TP_CPU_ROWS(double)
}  // namespace cpu_portable
namespace cpu_avx2 {
FLASHMACE_CONV_TP_CPU_ROWS(float)
FLASHMACE_CONV_TP_CPU_ROWS(double)
}  // namespace cpu_avx2
namespace cpu_avx512 {
FLASHMACE_CONV_TP_CPU_ROWS(float)
FLASHMACE_CONV_TP_CPU_ROWS(double)
}  // namespace cpu_avx512

#undef FLASHMACE_CONV_TP_CPU_ROWS

}  // namespace flashmace
