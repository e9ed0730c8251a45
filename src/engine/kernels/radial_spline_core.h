#pragma once
// What the CPU and CUDA radial-spline kernels share (radial_spline_kernels.h): where a row's length
// falls in the table. Plain C++ usable from both compilers.
#include <cmath>
#include <cstdint>

#include "engine/kernels/radial_spline_kernels.h"

#if defined(__CUDACC__)
#define FLASHMACE_SPLINE_HD __host__ __device__ __forceinline__
#else
#define FLASHMACE_SPLINE_HD inline
#endif

namespace flashmace {

// Row u's interval, and its position t in [0, 1) inside it; interval N (and t = 0) at and beyond
// r_max, where the functions and their slopes are zero.
template <typename T>
FLASHMACE_SPLINE_HD int32_t spline_row_interval(const RadialSplineArgs<T>& a, int64_t u, T* t) {
  const T* v = a.vectors + 3 * (a.first ? a.first[u] : u);
#if !defined(__CUDACC__)
  using std::sqrt;
#endif
  const T x = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) / a.spacing;
  *t = 0;
  if (!(x < static_cast<T>(a.intervals))) return static_cast<int32_t>(a.intervals);
  int64_t i = static_cast<int64_t>(x);
  if (i >= a.intervals) i = a.intervals - 1;
  *t = x - static_cast<T>(i);
  return static_cast<int32_t>(i);
}

}  // namespace flashmace
