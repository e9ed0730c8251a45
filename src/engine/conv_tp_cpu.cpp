// Conv TP message kernels on the CPU (mace_spec.md 5.2; the math and layouts: conv_tp_kernels.h).
// Parallel decomposition (OpenMP when built with it, else serial), each output owned by one thread:
//   forward:      one thread per receiver row: agg[row] summed over the row's edges in order;
//   dR, dY:       one thread per receiver row, for that row's edges (dR[e], dY[e] written);
//   dx (+=):      one thread per x row, over its edges in x_perm order.
#include <algorithm>

#include "engine/conv_tp_core.h"

namespace flashmace {

namespace {

template <typename F>
void parallel_rows(int64_t n, const F& body) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 8)
#endif
  for (int64_t r = 0; r < n; ++r) body(r);
}

}  // namespace

template <typename T>
void conv_tp_forward_cpu(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, T* agg) {
  parallel_rows(g.nrows, [&](int64_t row) {
    T* out = agg + row * t.dim_mid;
    std::fill(out, out + t.dim_mid, T(0));
    for (int64_t e = g.row_ptr[row]; e < g.row_ptr[row + 1]; ++e) {
      const T* x = g.x + g.xindex[e] * t.dim_in1;
      const T* y = g.Y + e * t.dim_sh;
      const T* r = conv_tp_radial(t, g, e);
      for (int i = 0; i < t.num_paths; ++i) {
        const ConvTPKernelPath& p = t.paths[i];
        for (int u = 0; u < p.mul; ++u)
          conv_tp_forward_add(t, p, r[p.w_offset + u], x + p.x_offset + u * p.d1, y + p.y_offset,
                              out + p.mid_offset + u * p.d3);
      }
    }
  });
}

template <typename T>
void conv_tp_backward_cpu(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const ConvTPGradients<T>& d) {
  parallel_rows(g.nrows, [&](int64_t row) {
    const T* grow = d.dagg + row * t.dim_mid;
    for (int64_t e = g.row_ptr[row]; e < g.row_ptr[row + 1]; ++e) {
      const T* x = g.x + g.xindex[e] * t.dim_in1;
      const T* y = g.Y + e * t.dim_sh;
      const T* r = conv_tp_radial(t, g, e);
      T* dr = d.dR + e * t.weight_numel;
      T* dy = d.dY + e * t.dim_sh;
      std::fill(dy, dy + t.dim_sh, T(0));
      for (int i = 0; i < t.num_paths; ++i) {
        const ConvTPKernelPath& p = t.paths[i];
        for (int u = 0; u < p.mul; ++u) {
          const T* x_u = x + p.x_offset + u * p.d1;
          const T* g_u = grow + p.mid_offset + u * p.d3;
          dr[p.w_offset + u] = conv_tp_weight_grad(t, p, x_u, y + p.y_offset, g_u);
          const T ru = r[p.w_offset + u];
          for (int32_t q = p.run_begin[kConvTPByM2]; q < p.run_end[kConvTPByM2]; ++q) {
            const ConvTPKernelRun run = t.runs[q];
            dy[p.y_offset + run.out] += ru * conv_tp_contract(t, run, x_u, g_u);
          }
        }
      }
    }
  });
  if (!d.dx) return;
  parallel_rows(g.num_x, [&](int64_t xr) {
    T* dx = d.dx + xr * t.dim_in1;
    for (int64_t j = d.x_ptr[xr]; j < d.x_ptr[xr + 1]; ++j) {
      const int64_t e = d.x_perm[j];
      const T* grow = d.dagg + conv_tp_edge_row(g, e) * t.dim_mid;
      const T* y = g.Y + e * t.dim_sh;
      const T* r = conv_tp_radial(t, g, e);
      for (int i = 0; i < t.num_paths; ++i) {
        const ConvTPKernelPath& p = t.paths[i];
        for (int u = 0; u < p.mul; ++u)
          conv_tp_x_grad_add(t, p, r[p.w_offset + u], y + p.y_offset, grow + p.mid_offset + u * p.d3,
                             dx + p.x_offset + u * p.d1);
      }
    }
  });
}

template void conv_tp_forward_cpu<float>(const ConvTPTables<float>&, const ConvTPEdges<float>&, float*);
template void conv_tp_forward_cpu<double>(const ConvTPTables<double>&, const ConvTPEdges<double>&, double*);
template void conv_tp_backward_cpu<float>(const ConvTPTables<float>&, const ConvTPEdges<float>&,
                                          const ConvTPGradients<float>&);
template void conv_tp_backward_cpu<double>(const ConvTPTables<double>&, const ConvTPEdges<double>&,
                                           const ConvTPGradients<double>&);

}  // namespace flashmace
