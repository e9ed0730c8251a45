#pragma once
// The per-row species_outer kernels (species_outer_cpu_rows.h) for one instruction set: a
// species_outer_cpu_<isa>.cpp defines FLASHMACE_CPU_ISA_NAMESPACE and FLASHMACE_CPU_VECTOR_BYTES and includes
// this file with its own compiler flags. The sums are the CUDA kernels' (species_outer_cuda.cu: the
// forward in double, edges in order; dh summed over j in order; dY over k, here in four interleaved
// partial sums) with the loops arranged for the vector units: the forward keeps a block of k values'
// sums over a run of edges in registers, the backward sums dh as vectors over k (dS is harmonic-major)
// and dY from a k-major copy of each dS slab.
// Internal linkage or the ISA namespace only, no standard-library template: code compiled for one
// instruction set must never be linked in for another.
#include "engine/kernels/cpu_vectors_impl.h"
#include "engine/kernels/species_outer_cpu_rows.h"

namespace flashmace {
namespace FLASHMACE_CPU_ISA_NAMESPACE {

namespace {

constexpr int kLanesD = FLASHMACE_CPU_VECTOR_BYTES / 8;
// The forward's double sums kept in registers: half the register file (32 registers with AVX-512).
constexpr int kAccVectors = FLASHMACE_CPU_VECTOR_BYTES == 64 ? 16 : 8;

template <int J>
struct Harmonics {
  static constexpr int value = J;
};

template <typename F>
inline void with_harmonics(int J, const F& f) {
  switch (J) {
    case 1:
      return f(Harmonics<1>{});
    case 4:
      return f(Harmonics<4>{});
    case 9:
      return f(Harmonics<9>{});
    case 16:
      return f(Harmonics<16>{});
    case 25:
      return f(Harmonics<25>{});
    default:
      return;
  }
}

// s[j * stride_j + kk] += sum over the edges [e0, e1) of h[e, k0 + kk] Y[e, j] for KB values of k,
// the products and sums in double (as the CUDA kernel), Y in NJ double vectors (zero past J).
template <typename T, int J, int KB>
inline void outer_block(const SpeciesOuterArgs<T>& a, int64_t e0, int64_t e1, int k0, T* s) {
  constexpr int NJ = (J + kLanesD - 1) / kLanesD;
  VecD acc[KB][NJ];
  for (int kk = 0; kk < KB; ++kk)
    for (int n = 0; n < NJ; ++n) acc[kk][n] = VecD{};
  for (int64_t e = e0; e < e1; ++e) {
    const T* he = a.h + (a.h_index ? a.h_index[e] : e) * a.H + k0;
    double yd[NJ * kLanesD];
    for (int j = 0; j < NJ * kLanesD; ++j) yd[j] = j < J ? static_cast<double>(a.Y[e * J + j]) : 0.0;
    VecD yv[NJ];
    for (int n = 0; n < NJ; ++n) yv[n] = load<VecD>(yd + n * kLanesD);
    for (int kk = 0; kk < KB; ++kk) {
      const double hk = static_cast<double>(he[kk]);
      for (int n = 0; n < NJ; ++n) acc[kk][n] += hk * yv[n];
    }
  }
  for (int kk = 0; kk < KB; ++kk) {
    double out[NJ * kLanesD];
    for (int n = 0; n < NJ; ++n) store(out + n * kLanesD, acc[kk][n]);
    for (int j = 0; j < J; ++j) s[j * a.stride_j + kk] += static_cast<T>(out[j]);
  }
}

template <typename T, int J>
void forward_row(const SpeciesOuterArgs<T>& a, int64_t row, T* S) {
  constexpr int NJ = (J + kLanesD - 1) / kLanesD, KB = kAccVectors / NJ > 1 ? kAccVectors / NJ : 1;
  const int64_t end = a.row_ptr[row + 1];
  for (int64_t e0 = a.row_ptr[row]; e0 < end;) {
    const int64_t z = a.slot[e0];
    int64_t e1 = e0 + 1;
    while (e1 < end && a.slot[e1] == z) ++e1;
    T* s = S + (row * a.Z + z) * a.H;
    int k0 = 0;
    for (; k0 + KB <= a.H; k0 += KB) outer_block<T, J, KB>(a, e0, e1, k0, s + k0);
    for (; k0 < a.H; ++k0) outer_block<T, J, 1>(a, e0, e1, k0, s + k0);
    e0 = e1;
  }
}

// dh[k] = sum_j ds[j * stride_j + k] y[j] (j in order) for K vectors of k at k0.
template <typename T, typename V, int J, int K>
inline void dh_block(const T* ds, int64_t stride_j, const T* y, int k0, T* dh) {
  constexpr int L = static_cast<int>(sizeof(V) / sizeof(T));
  V acc[K];
  for (int i = 0; i < K; ++i) acc[i] = y[0] * load<V>(ds + k0 + i * L);
  for (int j = 1; j < J; ++j)
    for (int i = 0; i < K; ++i) acc[i] += y[j] * load<V>(ds + j * stride_j + k0 + i * L);
  for (int i = 0; i < K; ++i) store(dh + k0 + i * L, acc[i]);
}

template <typename T, int J>
void backward_row(const SpeciesOuterArgs<T>& a, int64_t row, const T* dS, T* dh, T* dY, T* ds) {
  using V = typename Simd<T>::V;
  constexpr int L = static_cast<int>(sizeof(V) / sizeof(T));
  const int H = a.H;
  int64_t current = -1;
  for (int64_t e = a.row_ptr[row]; e < a.row_ptr[row + 1]; ++e) {
    const int64_t z = a.slot[e];
    const T* dsj = dS + (row * a.Z + z) * H;  // dS[j, row, z, k] at dsj[j * stride_j + k]
    if (z != current) {  // ds[k][j]: the slot's slab in k-major order, for dY
      for (int j = 0; j < J; ++j)
        for (int k = 0; k < H; ++k) ds[k * J + j] = dsj[j * a.stride_j + k];
      current = z;
    }
    const T* y = a.Y + e * J;
    const T* he = a.h + (a.h_index ? a.h_index[e] : e) * H;
    T* dhe = dh + e * H;
    int k0 = 0;
    for (; k0 + 4 * L <= H; k0 += 4 * L) dh_block<T, V, J, 4>(dsj, a.stride_j, y, k0, dhe);
    for (; k0 + L <= H; k0 += L) dh_block<T, V, J, 1>(dsj, a.stride_j, y, k0, dhe);
    for (; k0 < H; ++k0) dh_block<T, T, J, 1>(dsj, a.stride_j, y, k0, dhe);
    // dY[j] = sum_k h[k] ds[k][j], in four partial sums over k mod 4 (independent chains), added
    // pairwise at the end; vectors over j where J fills whole vectors.
    T* dy = dY + e * J;
    if constexpr (J % L == 0) {
      constexpr int NJ = J / L;
      V acc[4][NJ];
      for (int q = 0; q < 4; ++q)
        for (int n = 0; n < NJ; ++n) acc[q][n] = V{};
      int k = 0;
      for (; k + 4 <= H; k += 4)
        for (int q = 0; q < 4; ++q)
          for (int n = 0; n < NJ; ++n) acc[q][n] += he[k + q] * load<V>(ds + (k + q) * J + n * L);
      for (; k < H; ++k)
        for (int n = 0; n < NJ; ++n) acc[k % 4][n] += he[k] * load<V>(ds + k * J + n * L);
      for (int n = 0; n < NJ; ++n) store(dy + n * L, (acc[0][n] + acc[1][n]) + (acc[2][n] + acc[3][n]));
    } else {
      T acc[4][J] = {};
      for (int k = 0; k < H; ++k)
        for (int j = 0; j < J; ++j) acc[k % 4][j] += he[k] * ds[k * J + j];
      for (int j = 0; j < J; ++j) dy[j] = (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]);
    }
  }
}

}  // namespace

#define FLASHMACE_DEFINE_SPECIES_OUTER_ROWS(T)                                                                  \
  void species_outer_forward_row(const SpeciesOuterArgs<T>& a, int64_t row, T* S) {                            \
    with_harmonics(a.J, [&](auto h) { forward_row<T, decltype(h)::value>(a, row, S); });                       \
  }                                                                                                             \
  void species_outer_backward_row(const SpeciesOuterArgs<T>& a, int64_t row, const T* dS, T* dh, T* dY,        \
                                  T* scratch) {                                                                 \
    with_harmonics(a.J, [&](auto h) { backward_row<T, decltype(h)::value>(a, row, dS, dh, dY, scratch); });    \
  }
FLASHMACE_DEFINE_SPECIES_OUTER_ROWS(float)
FLASHMACE_DEFINE_SPECIES_OUTER_ROWS(double)
#undef FLASHMACE_DEFINE_SPECIES_OUTER_ROWS

}  // namespace FLASHMACE_CPU_ISA_NAMESPACE
}  // namespace flashmace
