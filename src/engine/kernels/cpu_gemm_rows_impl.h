#pragma once
// The row-block GEMM kernels (cpu_gemm_rows.h) for one instruction set: a cpu_gemm_<isa>.cpp defines
// FLASHMACE_CPU_ISA_NAMESPACE and FLASHMACE_CPU_VECTOR_BYTES and includes this file with its own
// compiler flags. A tile of kTileRows rows x one panel (two vectors) keeps its sums in registers over
// all of K: per k, two vector loads of the panel and one broadcast of A per row feed 2 kTileRows
// multiply-adds. The panel (K x width: for dR W^T 1,280 x 16 floats, 80 KB) is read from L2 by every
// tile of the block; the block's rows of A (cpu_gemm.cpp: ~128 KB) from L2 by every panel.
// Internal linkage or the ISA namespace only, no standard-library template: code compiled for one
// instruction set must never be linked in for another.
#include "engine/kernels/cpu_gemm_rows.h"
#include "engine/kernels/cpu_vectors_impl.h"

namespace flashmace {
namespace FLASHMACE_CPU_ISA_NAMESPACE {

namespace {

constexpr int kPanelVectors = 2;
// Rows per register tile: 2 x kTileRows sums, two panel vectors and a broadcast within the register
// file (16 vector registers below AVX-512, 32 with it).
constexpr int kTileRows = FLASHMACE_CPU_VECTOR_BYTES == 64 ? 12 : 6;

template <typename T>
constexpr int lanes() {
  return static_cast<int>(sizeof(typename Simd<T>::V) / sizeof(T));
}

// C[r0 + i, n0 + j] for i < R, j < width: the sums of one tile, written where the panel has columns.
template <typename T, int R>
inline void tile(const GemmRows<T>& g, int64_t r0, const T* bp, int64_t n0) {
  using V = typename Simd<T>::V;
  constexpr int L = lanes<T>(), W = kPanelVectors * L;
  V acc[R][kPanelVectors];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < kPanelVectors; ++v) acc[i][v] = V{};
  const T* a = g.A + r0 * g.lda;
  for (int64_t k = 0; k < g.K; ++k) {
    V b[kPanelVectors];
    for (int v = 0; v < kPanelVectors; ++v) b[v] = load<V>(bp + k * W + v * L);
    for (int i = 0; i < R; ++i) {
      const T x = a[i * g.lda + k];
      for (int v = 0; v < kPanelVectors; ++v) acc[i][v] += x * b[v];
    }
  }
  const int64_t cols = g.N - n0 < W ? g.N - n0 : W;
  for (int i = 0; i < R; ++i) {
    T* c = g.C + (r0 + i) * g.ldc + n0;
    if (cols == W) {
      for (int v = 0; v < kPanelVectors; ++v) store(c + v * L, acc[i][v]);
    } else {
      T part[W];
      for (int v = 0; v < kPanelVectors; ++v) store(part + v * L, acc[i][v]);
      for (int64_t j = 0; j < cols; ++j) c[j] = part[j];
    }
  }
}

template <typename T>
void rows(const GemmRows<T>& g, int64_t r0, int64_t r1) {
  constexpr int W = kPanelVectors * lanes<T>();
  for (int64_t n0 = 0; n0 < g.N; n0 += W) {
    const T* bp = g.Bp + (n0 / W) * g.K * W;
    int64_t r = r0;
    for (; r + kTileRows <= r1; r += kTileRows) tile<T, kTileRows>(g, r, bp, n0);
    for (; r < r1; ++r) tile<T, 1>(g, r, bp, n0);
  }
}

}  // namespace

int gemm_panel_width(float) { return kPanelVectors * lanes<float>(); }
int gemm_panel_width(double) { return kPanelVectors * lanes<double>(); }
void gemm_rows(const GemmRows<float>& g, int64_t r0, int64_t r1) { rows(g, r0, r1); }
void gemm_rows(const GemmRows<double>& g, int64_t r0, int64_t r1) { rows(g, r0, r1); }

}  // namespace FLASHMACE_CPU_ISA_NAMESPACE
}  // namespace flashmace
