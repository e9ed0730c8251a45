// radial_spline_kernels.h on the CPU: a stable counting sort of the rows by interval, then OpenMP
// over the sorted rows (neighbours share an interval's coefficients in cache), a row's K functions
// in the vector units (the [N][4][K] layout keeps each coefficient's values contiguous).
#include <cmath>
#include <vector>

#include "engine/kernels/radial_spline_core.h"
#include "engine/kernels/radial_spline_kernels.h"

namespace flashmace {

namespace {

// Partial sums in kLanes independent accumulators (vectorisable, and a fixed order), added at the end.
constexpr int kLanes = 16;

}  // namespace

template <typename T>
void radial_spline_sort_cpu(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (int64_t u = 0; u < a.rows; ++u) s.interval[u] = spline_row_interval(a, u, &s.t[u]);
  std::vector<int64_t> start(static_cast<std::size_t>(a.intervals) + 2, 0);
  for (int64_t u = 0; u < a.rows; ++u) ++start[static_cast<std::size_t>(s.interval[u]) + 1];
  for (std::size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
  for (int64_t u = 0; u < a.rows; ++u) s.order[start[static_cast<std::size_t>(s.interval[u])]++] = u;
}

template <typename T>
void radial_spline_forward_cpu(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s, T* out) {
  const int64_t K = a.width;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (int64_t p = 0; p < a.rows; ++p) {
    const int64_t u = s.order[p];
    const int32_t i = s.interval[u];
    const T t = s.t[u];
    T* o = out + u * K;
    if (i == a.intervals) {
      for (int64_t k = 0; k < K; ++k) o[k] = 0;
      continue;
    }
    const T* c0 = a.table + static_cast<int64_t>(i) * 4 * K;
    const T *c1 = c0 + K, *c2 = c1 + K, *c3 = c2 + K;
    for (int64_t k = 0; k < K; ++k) o[k] = c0[k] + t * (c1[k] + t * (c2[k] + t * c3[k]));
  }
}

template <typename T>
void radial_spline_backward_cpu(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s, const T* grad, T* dr) {
  const int64_t K = a.width;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (int64_t p = 0; p < a.rows; ++p) {
    const int64_t u = s.order[p];
    const int32_t i = s.interval[u];
    if (i == a.intervals) {
      dr[u] = 0;
      continue;
    }
    const T* c1 = a.table + (static_cast<int64_t>(i) * 4 + 1) * K;
    const T *c2 = c1 + K, *c3 = c2 + K;
    const T* g = grad + u * K;
    const T t2 = 2 * s.t[u], t3 = 3 * s.t[u] * s.t[u];
    T acc[kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= K; k += kLanes)
      for (int j = 0; j < kLanes; ++j) acc[j] += g[k + j] * (c1[k + j] + t2 * c2[k + j] + t3 * c3[k + j]);
    for (int j = 0; k < K; ++k, ++j) acc[j] += g[k] * (c1[k] + t2 * c2[k] + t3 * c3[k]);
    T sum = 0;
    for (int j = 0; j < kLanes; ++j) sum += acc[j];
    dr[u] = sum / a.spacing;
  }
}

template <typename T>
void radial_spline_edge_gradient_cpu(const T* vectors, const int64_t* index, const T* share, const T* dr,
                                     int64_t edges, T* gv) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (int64_t e = 0; e < edges; ++e) {
    const T* v = vectors + 3 * e;
    const T r = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    if (!(r > 0)) continue;
    const T s = dr[index ? index[e] : e] * (share ? share[e] : T(1)) / r;
    for (int c = 0; c < 3; ++c) gv[3 * e + c] += s * v[c];
  }
}

#define FLASHMACE_SPLINE_CPU(T)                                                                                    \
  template void radial_spline_sort_cpu<T>(const RadialSplineArgs<T>&, const RadialSplineRows<T>&);                 \
  template void radial_spline_forward_cpu<T>(const RadialSplineArgs<T>&, const RadialSplineRows<T>&, T*);          \
  template void radial_spline_backward_cpu<T>(const RadialSplineArgs<T>&, const RadialSplineRows<T>&, const T*, T*); \
  template void radial_spline_edge_gradient_cpu<T>(const T*, const int64_t*, const T*, const T*, int64_t, T*);
FLASHMACE_SPLINE_CPU(float)
FLASHMACE_SPLINE_CPU(double)
#undef FLASHMACE_SPLINE_CPU

}  // namespace flashmace
