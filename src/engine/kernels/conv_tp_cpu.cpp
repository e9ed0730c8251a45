// Conv TP message kernels on the CPU (mace_spec.md 5.2; the math and layouts: conv_tp_kernels.h).
// Parallel decomposition (OpenMP when built with it, else serial), each output owned by one thread:
//   forward:      one thread per receiver row: agg[row] summed over the row's edges in order;
//   dR, dY:       one thread per receiver row, for that row's edges (dR[e], dY[e] written);
//   dx (+=):      one thread per x row, over its edges in x_perm order.
#include <algorithm>
#include <vector>

#include "engine/kernels/conv_tp_core.h"

namespace flashmace {

namespace {

template <typename F>
void parallel_rows(int64_t n, const F& body) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 8)
#endif
  for (int64_t r = 0; r < n; ++r) body(r);
}

// s[u] = TP(x_u, y)[run.out] for every channel u of path p (a ByM3 run: a = x_u[m1], b = Y[m2]).
template <typename T>
void tp_component(const ConvTPTables<T>& t, const ConvTPKernelPath& p, const ConvTPKernelRun& run, const T* xp,
                  const T* y, T* s) {
  std::fill(s, s + p.mul, T(0));
  for (int32_t k = run.term_begin; k < run.term_end; ++k) {
    const T cy = t.coeff[k] * y[p.y_offset + t.terms[k].b];
    const T* xa = xp + t.terms[k].a;
    for (int u = 0; u < p.mul; ++u) s[u] += cy * xa[u * p.d1];
  }
}

}  // namespace

// The loops put the channel u innermost: a term's coefficient and its Y (or dagg) factor are the same
// for every channel, so each term is decoded once per edge and path, not once per channel.

template <typename T>
void conv_tp_forward_cpu(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, T* agg) {
  parallel_rows(g.nrows, [&](int64_t row) {
    std::vector<T> s(static_cast<std::size_t>(t.max_mul));
    T* out = agg + row * t.dim_mid;
    std::fill(out, out + t.dim_mid, T(0));
    for (int64_t e = g.row_ptr[row]; e < g.row_ptr[row + 1]; ++e) {
      const T* x = g.x + g.xindex[e] * t.dim_in1;
      const T* y = g.Y + e * t.dim_sh;
      const T* r = conv_tp_radial(t, g, e);
      for (int i = 0; i < t.num_paths; ++i) {
        const ConvTPKernelPath& p = t.paths[i];
        const T* xp = x + p.x_offset;
        const T* rp = r + p.w_offset;
        T* op = out + p.mid_offset;
        for (int32_t q = p.run_begin[kConvTPByM3]; q < p.run_end[kConvTPByM3]; ++q) {
          const ConvTPKernelRun run = t.runs[q];
          tp_component(t, p, run, xp, y, s.data());
          for (int u = 0; u < p.mul; ++u) op[u * p.d3 + run.out] += rp[u] * s[u];
        }
      }
    }
  });
}

template <typename T>
void conv_tp_backward_cpu(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const ConvTPGradients<T>& d) {
  parallel_rows(g.nrows, [&](int64_t row) {
    std::vector<T> s(static_cast<std::size_t>(t.max_mul)), acc(s.size());
    std::vector<T> rg;  // r_u * dagg_u[m3] of one path
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
        const T* xp = x + p.x_offset;
        const T* gp = grow + p.mid_offset;
        const T* rp = r + p.w_offset;
        // dR[u] = sum_m3 g_u[m3] * TP(x_u, y)[m3]
        std::fill(acc.begin(), acc.begin() + p.mul, T(0));
        for (int32_t q = p.run_begin[kConvTPByM3]; q < p.run_end[kConvTPByM3]; ++q) {
          const ConvTPKernelRun run = t.runs[q];
          tp_component(t, p, run, xp, y, s.data());
          for (int u = 0; u < p.mul; ++u) acc[u] += gp[u * p.d3 + run.out] * s[u];
        }
        for (int u = 0; u < p.mul; ++u) dr[p.w_offset + u] = acc[u];
        // dY[m2] += sum_u r_u sum_terms c x_u[m1] g_u[m3]
        rg.resize(static_cast<std::size_t>(p.mul) * p.d3);
        for (int u = 0; u < p.mul; ++u)
          for (int m = 0; m < p.d3; ++m) rg[u * p.d3 + m] = rp[u] * gp[u * p.d3 + m];
        for (int32_t q = p.run_begin[kConvTPByM2]; q < p.run_end[kConvTPByM2]; ++q) {
          const ConvTPKernelRun run = t.runs[q];
          T sum = 0;
          for (int32_t k = run.term_begin; k < run.term_end; ++k) {
            const T* xa = xp + t.terms[k].a;
            const T* gb = rg.data() + t.terms[k].b;
            T c = 0;
            for (int u = 0; u < p.mul; ++u) c += xa[u * p.d1] * gb[u * p.d3];
            sum += t.coeff[k] * c;
          }
          dy[p.y_offset + run.out] += sum;
        }
      }
    }
  });
  if (!d.dx) return;
  parallel_rows(g.num_x, [&](int64_t xr) {
    std::vector<T> s(static_cast<std::size_t>(t.max_mul));
    T* dx = d.dx + xr * t.dim_in1;
    for (int64_t j = d.x_ptr[xr]; j < d.x_ptr[xr + 1]; ++j) {
      const int64_t e = d.x_perm[j];
      const T* grow = d.dagg + conv_tp_edge_row(g, e) * t.dim_mid;
      const T* y = g.Y + e * t.dim_sh;
      const T* r = conv_tp_radial(t, g, e);
      for (int i = 0; i < t.num_paths; ++i) {
        const ConvTPKernelPath& p = t.paths[i];
        const T* gp = grow + p.mid_offset;
        const T* rp = r + p.w_offset;
        T* dxp = dx + p.x_offset;
        // dx_u[m1] += r_u * sum_terms c y[m2] g_u[m3]
        for (int32_t q = p.run_begin[kConvTPByM1]; q < p.run_end[kConvTPByM1]; ++q) {
          const ConvTPKernelRun run = t.runs[q];
          std::fill(s.begin(), s.begin() + p.mul, T(0));
          for (int32_t k = run.term_begin; k < run.term_end; ++k) {
            const T cy = t.coeff[k] * y[p.y_offset + t.terms[k].a];
            const T* gb = gp + t.terms[k].b;
            for (int u = 0; u < p.mul; ++u) s[u] += cy * gb[u * p.d3];
          }
          for (int u = 0; u < p.mul; ++u) dxp[u * p.d1 + run.out] += rp[u] * s[u];
        }
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
