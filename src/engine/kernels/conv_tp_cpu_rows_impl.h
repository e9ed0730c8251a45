#pragma once
// The per-row conv TP kernels (conv_tp_cpu_rows.h) for one instruction set: a conv_tp_cpu_<isa>.cpp
// defines FLASHMACE_CPU_ISA_NAMESPACE and FLASHMACE_CPU_VECTOR_BYTES and includes this file with its own compiler
// flags. Each run's Wigner-3j terms are summed for a tile of channels held in vector registers; the arithmetic per edge
// is conv_tp_core.h's with the channel loop innermost (only the order of the sums over terms differs from the CUDA
// kernels: float64 round-off). Everything here has internal linkage or lives in the ISA namespace, and no
// standard-library template is instantiated: code compiled for one instruction set must never be linked in for another.
#include "engine/kernels/conv_tp_cpu_rows.h"

#if !defined(FLASHMACE_CPU_ISA_NAMESPACE) || !defined(FLASHMACE_CPU_VECTOR_BYTES)
#error "define FLASHMACE_CPU_ISA_NAMESPACE and FLASHMACE_CPU_VECTOR_BYTES before including conv_tp_cpu_rows_impl.h"
#endif

namespace flashmace {
namespace FLASHMACE_CPU_ISA_NAMESPACE {

namespace {

// A tile of channels is kVecs GCC/Clang vectors of the instruction set's register width
// (FLASHMACE_CPU_VECTOR_BYTES: 16 SSE2, 32 AVX2, 64 AVX-512), held in registers: 8 with AVX-512's 32
// registers, 4 with the 16 of the others. Each vector of a tile sums its own chain of terms, so the
// tile hides the adds' latency; channels left over when `mul` is not a multiple of the tile go in
// tiles of 4, 2 and 1 vectors, then one at a time with V = T. (A channel's sums are the same whatever
// tile it falls in.)
typedef float VecF __attribute__((vector_size(FLASHMACE_CPU_VECTOR_BYTES)));
typedef double VecD __attribute__((vector_size(FLASHMACE_CPU_VECTOR_BYTES)));
template <typename T>
struct Simd;
template <>
struct Simd<float> {
  using V = VecF;
};
template <>
struct Simd<double> {
  using V = VecD;
};
constexpr int kVecs = FLASHMACE_CPU_VECTOR_BYTES == 64 ? 8 : 4;

template <typename V>
inline V load(const void* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V>
inline void store(void* p, const V& v) {
  __builtin_memcpy(p, &v, sizeof(V));
}
// The sum of a vector's lanes, pairwise (halves added until one lane is left).
template <typename T, typename V>
inline T lane_sum(const V& v) {
  constexpr int L = sizeof(V) / sizeof(T);
  T a[L];
  __builtin_memcpy(a, &v, sizeof(V));
  for (int w = L / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) a[l] += a[l + w];
  return a[0];
}

// Where a tile of vector type V keeps its per-m2 dY partials: vector tiles in vectors, the channels
// left over (V = T) in scalars.
template <typename V, typename T>
struct Partials {
  static V* of(V* v, T*) { return v; }
};
template <typename T>
struct Partials<T, T> {
  template <typename W>
  static T* of(W*, T* s) {
    return s;
  }
};

template <typename T>
const T* radial_row(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, int64_t e) {
  return g.R + (g.radial_index ? g.radial_index[e] : e) * t.weight_numel;
}

// The coefficient of each term of a path's runs in `order` times the edge's Y factor:
// c * Y[term.b] (by m3: forward and dR) or c * Y[term.a] (by m1: dx).
template <typename T>
void scale_terms(const ConvTPTables<T>& t, const ConvTPKernelPath& p, int order, const T* y, T* cy) {
  const int32_t k0 = t.runs[p.run_begin[order]].term_begin;
  const int32_t k1 = t.runs[p.run_end[order] - 1].term_end;
  for (int32_t k = k0; k < k1; ++k)
    cy[k - k0] = t.coeff[k] * y[p.y_offset + (order == kConvTPByM3 ? t.terms[k].b : t.terms[k].a)];
}

// The tile functions below work on the N vectors of type V (N * L channels) at channel u0.
// s[j] = sum over the run's terms of cy[k] * v[term.a or term.b][u0 + j L .. ]
template <typename T, typename V, int N, bool kUseA>
inline void run_sum(const ConvTPTables<T>& t, const ConvTPKernelRun& run, int32_t k0, const T* cy, const T* v,
                    int32_t mul, int u0, V* s) {
  constexpr int L = sizeof(V) / sizeof(T);
  for (int j = 0; j < N; ++j) s[j] = V{};
  for (int32_t k = run.term_begin; k < run.term_end; ++k) {
    const T c = cy[k - k0];
    const T* va = v + (kUseA ? t.terms[k].a : t.terms[k].b) * mul + u0;
    for (int j = 0; j < N; ++j) s[j] += c * load<V>(va + j * L);
  }
}

// out[run.out][u] += r[u] * sum over the run's terms of cy[k] * v[term's input][u], for every run of
// one edge and path in `order`: the forward message (by m3: v = x, out = agg) and the x gradient
// (by m1: v = g, out = dx).
template <typename T, typename V, int N, int order>
void tile_runs(const ConvTPTables<T>& t, const ConvTPKernelPath& p, int u0, const T* cy, const T* v, const T* r,
               T* out) {
  constexpr int L = sizeof(V) / sizeof(T);
  V rv[N];
  for (int j = 0; j < N; ++j) rv[j] = load<V>(r + u0 + j * L);
  const int32_t q0 = p.run_begin[order], k0 = t.runs[q0].term_begin;
  for (int32_t q = q0; q < p.run_end[order]; ++q) {
    V s[N];
    run_sum<T, V, N, order == kConvTPByM3>(t, t.runs[q], k0, cy, v, p.mul, u0, s);
    T* o = out + t.runs[q].out * p.mul + u0;
    for (int j = 0; j < N; ++j) store(o + j * L, load<V>(o + j * L) + rv[j] * s[j]);
  }
}

// For one edge and path (dR stored, or added with add_dr):
//   dR[u]      = sum_m3 g[m3][u] * TP(x_u, y)[m3]
//   dyv[m2] += r[u] * sum_terms c * x[m1][u] * g[m3][u]   (lane partials of dY[m2], summed per path)
template <typename T, typename V, int N>
void tile_backward(const ConvTPTables<T>& t, const ConvTPKernelPath& p, int u0, const T* cy, const T* x, const T* g,
                   const T* r, T* dr, bool add_dr, V* dyv) {
  constexpr int L = sizeof(V) / sizeof(T);
  const int32_t mul = p.mul, q0 = p.run_begin[kConvTPByM3], k0 = t.runs[q0].term_begin;
  V acc[N];
  for (int j = 0; j < N; ++j) acc[j] = V{};
  for (int32_t q = q0; q < p.run_end[kConvTPByM3]; ++q) {
    V s[N];
    run_sum<T, V, N, true>(t, t.runs[q], k0, cy, x, mul, u0, s);
    const T* gm = g + t.runs[q].out * mul + u0;
    for (int j = 0; j < N; ++j) acc[j] += load<V>(gm + j * L) * s[j];
  }
  V rv[N];
  for (int j = 0; j < N; ++j) {
    store(dr + u0 + j * L, add_dr ? load<V>(dr + u0 + j * L) + acc[j] : acc[j]);
    rv[j] = load<V>(r + u0 + j * L);
  }
  for (int32_t q = p.run_begin[kConvTPByM2]; q < p.run_end[kConvTPByM2]; ++q) {
    const ConvTPKernelRun run = t.runs[q];
    V v[N];
    for (int j = 0; j < N; ++j) v[j] = V{};
    for (int32_t k = run.term_begin; k < run.term_end; ++k) {
      const T c = t.coeff[k];
      const T* xa = x + t.terms[k].a * mul + u0;
      const T* gb = g + t.terms[k].b * mul + u0;
      for (int j = 0; j < N; ++j) v[j] += (c * load<V>(xa + j * L)) * load<V>(gb + j * L);
    }
    V sum = rv[0] * v[0];
    for (int j = 1; j < N; ++j) sum += rv[j] * v[j];
    dyv[run.out] += sum;
  }
}

// CALL(V, N, u0) over the full tiles of kVecs vectors, then tiles of 4, 2 and 1 vectors, then channel
// by channel (V = T) for the rest.
#define FLASHMACE_OVER_TILES(T, mul, CALL)                                    \
  do {                                                                        \
    using Vt = typename Simd<T>::V;                                           \
    constexpr int kLanes = static_cast<int>(sizeof(Vt) / sizeof(T));          \
    int u0 = 0;                                                               \
    for (; u0 + kVecs * kLanes <= (mul); u0 += kVecs * kLanes) CALL(Vt, kVecs, u0); \
    if (kVecs > 4 && u0 + 4 * kLanes <= (mul)) {                              \
      CALL(Vt, (kVecs > 4 ? 4 : 1), u0);                                      \
      u0 += 4 * kLanes;                                                       \
    }                                                                         \
    if (u0 + 2 * kLanes <= (mul)) {                                           \
      CALL(Vt, 2, u0);                                                        \
      u0 += 2 * kLanes;                                                       \
    }                                                                         \
    if (u0 + kLanes <= (mul)) {                                               \
      CALL(Vt, 1, u0);                                                        \
      u0 += kLanes;                                                           \
    }                                                                         \
    for (; u0 < (mul); ++u0) CALL(T, 1, u0);                                  \
  } while (0)

template <typename T>
void forward_row(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const T* xt, int64_t row, T* out, T* cy) {
  for (int64_t e = g.row_ptr[row]; e < g.row_ptr[row + 1]; ++e) {
    const T* x = xt + g.xindex[e] * t.dim_in1;
    const T* r = radial_row(t, g, e);
    for (int i = 0; i < t.num_paths; ++i) {
      const ConvTPKernelPath& p = t.paths[i];
      scale_terms(t, p, kConvTPByM3, g.Y + e * t.dim_sh, cy);
#define FLASHMACE_TILE(V, N, U0) \
  tile_runs<T, V, N, kConvTPByM3>(t, p, U0, cy, x + p.x_offset, r + p.w_offset, out + p.mid_offset)
      FLASHMACE_OVER_TILES(T, p.mul, FLASHMACE_TILE);
#undef FLASHMACE_TILE
    }
  }
}

// The most components of a spherical harmonic a path reads (l <= 7; checked by conv_tp_cpu.cpp).
constexpr int kMaxD2 = 15;

template <typename T>
void backward_edge(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const ConvTPGradients<T>& d, const T* xt,
                   const T* gt, int64_t e, T* dr, bool add_dr, T* cy) {
  using Vt = typename Simd<T>::V;
  const T* grow = gt + g.edge_row[e] * t.dim_mid;
  const T* x = xt + g.xindex[e] * t.dim_in1;
  const T* r = radial_row(t, g, e);
  T* dy = d.dY + e * t.dim_sh;
  for (int m = 0; m < t.dim_sh; ++m) dy[m] = 0;
  for (int i = 0; i < t.num_paths; ++i) {
    const ConvTPKernelPath& p = t.paths[i];
    scale_terms(t, p, kConvTPByM3, g.Y + e * t.dim_sh, cy);
    Vt dyv[kMaxD2];
    T dys[kMaxD2];
    for (int m = 0; m < p.d2; ++m) {
      dyv[m] = Vt{};
      dys[m] = 0;
    }
#define FLASHMACE_TILE(V, N, U0)                                                                                     \
  tile_backward<T, V, N>(t, p, U0, cy, x + p.x_offset, grow + p.mid_offset, r + p.w_offset, dr + p.w_offset, add_dr, \
                         Partials<V, T>::of(dyv, dys))
    FLASHMACE_OVER_TILES(T, p.mul, FLASHMACE_TILE);
#undef FLASHMACE_TILE
    for (int m = 0; m < p.d2; ++m) dy[p.y_offset + m] += lane_sum<T>(dyv[m]) + dys[m];
  }
}

template <typename T>
void x_grad_row(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const ConvTPGradients<T>& d, const T* gt, int64_t xr,
                T* dx, T* cy) {
  for (int64_t j = d.x_ptr[xr]; j < d.x_ptr[xr + 1]; ++j) {
    const int64_t e = d.x_perm[j];
    const T* grow = gt + g.edge_row[e] * t.dim_mid;
    const T* r = radial_row(t, g, e);
    for (int i = 0; i < t.num_paths; ++i) {
      const ConvTPKernelPath& p = t.paths[i];
      scale_terms(t, p, kConvTPByM1, g.Y + e * t.dim_sh, cy);
#define FLASHMACE_TILE(V, N, U0) \
  tile_runs<T, V, N, kConvTPByM1>(t, p, U0, cy, grow + p.mid_offset, r + p.w_offset, dx + p.x_offset)
      FLASHMACE_OVER_TILES(T, p.mul, FLASHMACE_TILE);
#undef FLASHMACE_TILE
    }
  }
}

#undef FLASHMACE_OVER_TILES

}  // namespace

#define FLASHMACE_DEFINE_ROWS(T)                                                                                       \
  void conv_tp_forward_row(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const T* xt, int64_t row, T* out_mu,     \
                           T* cy) {                                                                                    \
    forward_row(t, g, xt, row, out_mu, cy);                                                                            \
  }                                                                                                                    \
  void conv_tp_backward_edge(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const ConvTPGradients<T>& d,           \
                             const T* xt, const T* gt, int64_t e, T* dr, bool add_dr, T* cy) {                         \
    backward_edge(t, g, d, xt, gt, e, dr, add_dr, cy);                                                                 \
  }                                                                                                                    \
  void conv_tp_x_grad_row(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const ConvTPGradients<T>& d, const T* gt, \
                          int64_t xr, T* dx_mu, T* cy) {                                                               \
    x_grad_row(t, g, d, gt, xr, dx_mu, cy);                                                                            \
  }
FLASHMACE_DEFINE_ROWS(float)
FLASHMACE_DEFINE_ROWS(double)
#undef FLASHMACE_DEFINE_ROWS

}  // namespace FLASHMACE_CPU_ISA_NAMESPACE
}  // namespace flashmace
