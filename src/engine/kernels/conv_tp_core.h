#pragma once
// The arithmetic shared by the CPU and CUDA conv TP kernels (conv_tp_kernels.h), for one edge,
// one channel u and one path; the callers differ only in loop order and in who owns which output.
#include "engine/kernels/conv_tp_kernels.h"

#if defined(__CUDACC__)
#define FLASHMACE_HD __host__ __device__ __forceinline__
#else
#define FLASHMACE_HD inline
#endif

namespace flashmace {

// sum over a run's terms of c * a[ia] * b[ib].
template <typename T>
FLASHMACE_HD T conv_tp_contract(const ConvTPTables<T>& t, const ConvTPKernelRun& run, const T* a, const T* b) {
  T s = 0;
  for (int32_t i = run.term_begin; i < run.term_end; ++i) s += t.coeff[i] * a[t.terms[i].a] * b[t.terms[i].b];
  return s;
}

// The receiver row of edge e: the last row r with row_ptr[r] <= e (empty rows are skipped since
// their successor starts at the same edge).
FLASHMACE_HD int64_t conv_tp_row_of_edge(const int64_t* row_ptr, int64_t nrows, int64_t e) {
  int64_t lo = 0, hi = nrows;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (row_ptr[mid] <= e)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// The row of edge e: from the per-edge table when there is one.
template <typename T>
FLASHMACE_HD int64_t conv_tp_edge_row(const ConvTPEdges<T>& g, int64_t e) {
  return g.edge_row ? g.edge_row[e] : conv_tp_row_of_edge(g.row_ptr, g.nrows, e);
}

// The radial weights of edge e: its row of R, or the row it shares (radial_index).
template <typename T>
FLASHMACE_HD const T* conv_tp_radial(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, int64_t e) {
  return g.R + (g.radial_index ? g.radial_index[e] : e) * t.weight_numel;
}

// The x row that CSR row r of the dx pass accumulates into.
template <typename T>
FLASHMACE_HD int64_t conv_tp_x_row(const ConvTPGradients<T>& d, int64_t r) {
  return d.x_rows ? d.x_rows[r] : r;
}

// out_u[m3] += r * TP(x_u, y)[m3]   (x_u: block i1 at channel u, y: block i2, out_u: block k at u)
template <typename T>
FLASHMACE_HD void conv_tp_forward_add(const ConvTPTables<T>& t, const ConvTPKernelPath& p, T r, const T* x_u,
                                      const T* y, T* out_u) {
  for (int32_t q = p.run_begin[kConvTPByM3]; q < p.run_end[kConvTPByM3]; ++q) {
    const ConvTPKernelRun run = t.runs[q];
    out_u[run.out] += r * conv_tp_contract(t, run, x_u, y);
  }
}

// dR[e, w_offset + u] = sum_m3 g_u[m3] * TP(x_u, y)[m3]
template <typename T>
FLASHMACE_HD T conv_tp_weight_grad(const ConvTPTables<T>& t, const ConvTPKernelPath& p, const T* x_u, const T* y,
                                   const T* g_u) {
  T s = 0;
  for (int32_t q = p.run_begin[kConvTPByM3]; q < p.run_end[kConvTPByM3]; ++q) {
    const ConvTPKernelRun run = t.runs[q];
    s += g_u[run.out] * conv_tp_contract(t, run, x_u, y);
  }
  return s;
}

// dx_u[m1] += r * sum_{m2,m3} c y[m2] g_u[m3]
template <typename T>
FLASHMACE_HD void conv_tp_x_grad_add(const ConvTPTables<T>& t, const ConvTPKernelPath& p, T r, const T* y,
                                     const T* g_u, T* dx_u) {
  for (int32_t q = p.run_begin[kConvTPByM1]; q < p.run_end[kConvTPByM1]; ++q) {
    const ConvTPKernelRun run = t.runs[q];
    dx_u[run.out] += r * conv_tp_contract(t, run, y, g_u);
  }
}

}  // namespace flashmace
