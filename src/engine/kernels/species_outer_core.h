#pragma once
// The per-thread work of species_outer_kernels.h's CUDA per-edge kernel.
#include <type_traits>

#include "engine/kernels/species_outer_kernels.h"

#if defined(__CUDACC__)
#define FLASHMACE_OUTER_HD __host__ __device__ __forceinline__
#else
#define FLASHMACE_OUTER_HD inline
#endif

namespace flashmace {

#if defined(__CUDA_ARCH__)
#define FLASHMACE_OUTER_UNROLL _Pragma("unroll")
#else
#define FLASHMACE_OUTER_UNROLL
#endif

// dh[e, :] and dY[e, :] of one edge (the CUDA per-edge kernel).
template <typename T, int J>
FLASHMACE_OUTER_HD void species_outer_edge(const SpeciesOuterArgs<T>& a, int64_t e, const T* dS, T* dh, T* dY) {
  const T* ds = dS + (a.edge_row[e] * a.Z + a.slot[e]) * a.H;
  T y[J], dy[J];
  FLASHMACE_OUTER_UNROLL
  for (int j = 0; j < J; ++j) {
    y[j] = a.Y[e * J + j];
    dy[j] = 0;
  }
  const T* he = a.h + (a.h_index ? a.h_index[e] : e) * a.H;
  T* dhe = dh + e * a.H;
  for (int k = 0; k < a.H; ++k) {
    const T hk = he[k];
    T s = 0;
    FLASHMACE_OUTER_UNROLL
    for (int j = 0; j < J; ++j) {
      const T d = ds[j * a.stride_j + k];
      s += d * y[j];
      dy[j] += hk * d;
    }
    dhe[k] = s;
  }
  FLASHMACE_OUTER_UNROLL
  for (int j = 0; j < J; ++j) dY[e * J + j] = dy[j];
}

// Calls f(std::integral_constant<int, J>()) for J = (l_max + 1)^2, l_max = 0..4 (first_layer.cpp
// accepts no other counts).
template <typename F>
void with_harmonic_count(int J, const F& f) {
  switch (J) {
    case 1:
      return f(std::integral_constant<int, 1>());
    case 4:
      return f(std::integral_constant<int, 4>());
    case 9:
      return f(std::integral_constant<int, 9>());
    case 16:
      return f(std::integral_constant<int, 16>());
    case 25:
      return f(std::integral_constant<int, 25>());
    default:
      return;
  }
}

}  // namespace flashmace
