#pragma once
// The per-thread work of species_outer_kernels.h, shared by the CPU loops and the CUDA kernels.
#include "engine/species_outer_kernels.h"

#if defined(__CUDACC__)
#define FLASHMACE_OUTER_HD __host__ __device__ __forceinline__
#else
#define FLASHMACE_OUTER_HD inline
#endif

namespace flashmace {

// S[row, :, k, :] (zeroed by the caller) for one (row, k); a run of edges with the same slot is
// summed in registers and added once.
template <typename T>
FLASHMACE_OUTER_HD void species_outer_row(const SpeciesOuterArgs<T>& a, int64_t row, int k, T* S) {
  double acc[kSpeciesOuterMaxJ];
  for (int j = 0; j < kSpeciesOuterMaxJ; ++j) acc[j] = 0;
  int64_t current = -1;
  const auto flush = [&] {
    if (current < 0) return;
    T* s = S + ((row * a.Z + current) * a.H + k) * a.J;
    for (int j = 0; j < a.J; ++j) {
      s[j] += static_cast<T>(acc[j]);
      acc[j] = 0;
    }
  };
  for (int64_t e = a.row_ptr[row]; e < a.row_ptr[row + 1]; ++e) {
    if (a.slot[e] != current) {
      flush();
      current = a.slot[e];
    }
    const T hk = a.h[e * a.H + k];
    const T* y = a.Y + e * a.J;
    for (int j = 0; j < a.J; ++j) acc[j] += static_cast<double>(hk * y[j]);
  }
  flush();
}

template <typename T>
FLASHMACE_OUTER_HD void species_outer_edge(const SpeciesOuterArgs<T>& a, int64_t e, const T* dS, T* dh, T* dY) {
  const T* ds = dS + (a.edge_row[e] * a.Z + a.slot[e]) * a.H * a.J;
  T y[kSpeciesOuterMaxJ], dy[kSpeciesOuterMaxJ];
  for (int j = 0; j < a.J; ++j) {
    y[j] = a.Y[e * a.J + j];
    dy[j] = 0;
  }
  for (int k = 0; k < a.H; ++k) {
    const T hk = a.h[e * a.H + k];
    const T* d = ds + k * a.J;
    T s = 0;
    for (int j = 0; j < a.J; ++j) {
      s += d[j] * y[j];
      dy[j] += hk * d[j];
    }
    dh[e * a.H + k] = s;
  }
  for (int j = 0; j < a.J; ++j) dY[e * a.J + j] = dy[j];
}

}  // namespace flashmace
