#pragma once
// The per-row conv TP kernels (conv_tp_cpu_rows.h) for one instruction set: a conv_tp_cpu_<isa>.cpp
// defines FLASHMACE_CPU_ISA_NAMESPACE and FLASHMACE_CPU_VECTOR_BYTES and includes this file with its own compiler
// flags. Per edge and path, the Wigner-3j terms and the edge's Y are folded into a small dense matrix
// (couplings()), and the channels are contracted with it in tiles of vector registers, by kernels
// compiled for each path shape of l <= 3 (loops of known length, unrolled). The arithmetic is
// conv_tp_core.h's with the channel loop innermost; only the order of the sums over terms differs from
// the CUDA kernels (float64 round-off). Everything here has internal linkage or lives in the ISA
// namespace, and no standard-library template is instantiated: code compiled for one instruction set must
// never be linked in for another.
#include "engine/kernels/cpu_vectors_impl.h"
#include "engine/kernels/conv_tp_cpu_rows.h"


namespace flashmace {
namespace FLASHMACE_CPU_ISA_NAMESPACE {

namespace {

// Channels are processed in tiles of up to kVecs vectors (cpu_vectors_impl.h): 8 with AVX-512's 32
// registers, 4 with the 16 of the others. Each vector of a tile sums its own chain of terms, so a tile hides the adds' latency.
constexpr int kVecs = FLASHMACE_CPU_VECTOR_BYTES == 64 ? 8 : 4;

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

template <typename T>
const T* radial_row(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, int64_t e) {
  return g.R + (g.radial_index ? g.radial_index[e] : e) * t.weight_numel;
}

// Every path's coupling of input to output components for one edge (conv_tp_cpu_rows.h): the
// Wigner-3j terms with the edge's Y folded in, M = sum_b Y[b] c[b], in blocks of four vectors.
template <typename T>
void couplings(const ConvTPCouplings<T>& cm, int dim_sh, const T* y, T* m) {
  using V = typename Simd<T>::V;
  constexpr int L = static_cast<int>(sizeof(V) / sizeof(T));
  int k = 0;
  for (; k + 4 * L <= cm.size; k += 4 * L) {
    V acc[4] = {};
    for (int b = 0; b < dim_sh; ++b)
      for (int j = 0; j < 4; ++j) acc[j] += y[b] * load<V>(cm.c + b * cm.size + k + j * L);
    for (int j = 0; j < 4; ++j) store(m + k + j * L, acc[j]);
  }
  for (; k < cm.size; k += L) {
    V acc = V{};
    for (int b = 0; b < dim_sh; ++b) acc += y[b] * load<V>(cm.c + b * cm.size + k);
    store(m + k, acc);
  }
}

// A tile of N vectors of type V (N * L channels), as a tag for the generic lambdas below.
template <typename V, int N>
struct Tile {
  using Vec = V;
  static constexpr int n = N;
};

// f(Tile<V, N>, u0) over the channels [0, mul): tiles of kMax vectors, then of 4, 2 and 1 vectors,
// then channel by channel (V = T). A channel's sums are the same whatever tile it falls in.
template <typename T, int kMax, typename F>
inline void over_tiles(int mul, const F& f) {
  using V = typename Simd<T>::V;
  constexpr int L = static_cast<int>(sizeof(V) / sizeof(T));
  int u0 = 0;
  for (; u0 + kMax * L <= mul; u0 += kMax * L) f(Tile<V, kMax>{}, u0);
  if constexpr (kMax > 4)
    if (u0 + 4 * L <= mul) {
      f(Tile<V, 4>{}, u0);
      u0 += 4 * L;
    }
  if constexpr (kMax > 2)
    if (u0 + 2 * L <= mul) {
      f(Tile<V, 2>{}, u0);
      u0 += 2 * L;
    }
  if constexpr (kMax > 1)
    if (u0 + L <= mul) {
      f(Tile<V, 1>{}, u0);
      u0 += L;
    }
  for (; u0 < mul; ++u0) f(Tile<T, 1>{}, u0);
}

// The vectors per tile when a tile keeps D inputs per vector in registers (32 registers with
// AVX-512, 16 with the others): all kVecs for one, half for three, a quarter for more.
constexpr int tile_vectors(int d) { return d == 1 ? kVecs : d == 3 ? kVecs / 2 : (kVecs / 4 > 0 ? kVecs / 4 : 1); }

// A path shape: D1 x D3 components, fixed at compile time for the irreps of l <= 3 (d = 1, 3, 5, 7);
// 0 stands for the path's own (run-time) sizes, up to kMaxD (and Y up to l = 7: kMaxDimSh).
constexpr int kMaxD = 15, kMaxDimSh = 64;
template <int D1, int D3>
struct Shape {
  static constexpr int d1 = D1, d3 = D3;
};
template <typename F>
inline void with_shape(int d1, int d3, const F& f) {
#define FLASHMACE_SHAPE(A, B) \
  case A * 16 + B:            \
    return f(Shape<A, B>{});
#define FLASHMACE_SHAPES(A) \
  FLASHMACE_SHAPE(A, 1) FLASHMACE_SHAPE(A, 3) FLASHMACE_SHAPE(A, 5) FLASHMACE_SHAPE(A, 7)
  switch (d1 * 16 + d3) {
    FLASHMACE_SHAPES(1) FLASHMACE_SHAPES(3) FLASHMACE_SHAPES(5) FLASHMACE_SHAPES(7)
    default:
      return f(Shape<0, 0>{});
  }
#undef FLASHMACE_SHAPES
#undef FLASHMACE_SHAPE
}

// The vectors per tile when a tile keeps D values per vector in registers across edges (its outputs
// and one edge's inputs): up to kVecs, and about 28 registers of AVX-512's 32 (14 of the others' 16).
constexpr int edge_tile_vectors(int d) {
  const int n = (kVecs == 8 ? 28 : 14) / d;
  return n >= kVecs ? kVecs : n >= 4 ? 4 : n >= 2 ? 2 : 1;
}

// out[m3][u] += sum over the edges [e0, e1) of sum_a M_e[a][m3] (r_u x_u[a]) for one path, each tile of
// outputs in registers over the edges (stored once, not once per edge), each edge's M at
// m + (e - e0) * m_stride. The same sums in the same order as edge by edge.
template <typename T, int D1, int D3>
void forward_path(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const ConvTPKernelPath& p, const T* xt,
                  int64_t e0, int64_t e1, const T* m, int m_stride, T* out) {
  constexpr int kD1 = D1 ? D1 : kMaxD, kD3 = D3 ? D3 : kMaxD;
  const int d1 = D1 ? D1 : p.d1, d3 = D3 ? D3 : p.d3, mul = p.mul;
  over_tiles<T, edge_tile_vectors(kD1 + kD3)>(mul, [&](auto tile, int u0) {
    using V = typename decltype(tile)::Vec;
    constexpr int N = decltype(tile)::n, L = static_cast<int>(sizeof(V) / sizeof(T));
    V acc[kD3][N];
    for (int m3 = 0; m3 < d3; ++m3)
      for (int j = 0; j < N; ++j) acc[m3][j] = load<V>(out + m3 * mul + u0 + j * L);
    for (int64_t e = e0; e < e1; ++e) {
      const T* r = radial_row(t, g, e) + p.w_offset + u0;
      const T* x = xt + g.xindex[e] * t.dim_in1 + p.x_offset + u0;
      const T* c = m + (e - e0) * m_stride;
      V rx[kD1][N];
      for (int a = 0; a < d1; ++a)
        for (int j = 0; j < N; ++j) rx[a][j] = load<V>(r + j * L) * load<V>(x + a * mul + j * L);
      for (int m3 = 0; m3 < d3; ++m3)
        for (int a = 0; a < d1; ++a) {
          const T cc = c[a * d3 + m3];
          for (int j = 0; j < N; ++j) acc[m3][j] += cc * rx[a][j];
        }
    }
    for (int m3 = 0; m3 < d3; ++m3)
      for (int j = 0; j < N; ++j) store(out + m3 * mul + u0 + j * L, acc[m3][j]);
  });
}

// dx[a][u] += r_u sum_m3 M[a][m3] g_u[m3] for one edge and path.
template <typename T, int D1, int D3>
void dx_path(const ConvTPKernelPath& p, const T* m, const T* g, const T* r, T* dx) {
  const int d1 = D1 ? D1 : p.d1, d3 = D3 ? D3 : p.d3, mul = p.mul;
  over_tiles<T, tile_vectors(D3 ? D3 : kMaxD)>(mul, [&](auto tile, int u0) {
    using V = typename decltype(tile)::Vec;
    constexpr int N = decltype(tile)::n, L = static_cast<int>(sizeof(V) / sizeof(T));
    V gv[D3 ? D3 : kMaxD][N], rv[N];
    for (int m3 = 0; m3 < d3; ++m3)
      for (int j = 0; j < N; ++j) gv[m3][j] = load<V>(g + m3 * mul + u0 + j * L);
    for (int j = 0; j < N; ++j) rv[j] = load<V>(r + u0 + j * L);
    for (int a = 0; a < d1; ++a) {
      V w[N];
      for (int j = 0; j < N; ++j) w[j] = V{};
      for (int m3 = 0; m3 < d3; ++m3) {
        const T c = m[a * d3 + m3];
        for (int j = 0; j < N; ++j) w[j] += c * gv[m3][j];
      }
      T* o = dx + a * mul + u0;
      for (int j = 0; j < N; ++j) store(o + j * L, load<V>(o + j * L) + rv[j] * w[j]);
    }
  });
}

// One edge and path's backward from its x and g rows, in one sweep over the channels (each vector of
// x, g and r loaded once for all of them), with W_u[a] = sum_m3 M[a][m3] g_u[m3]:
//   dR_u = sum_a x_u[a] W_u[a], stored or added (add_dr), and dY below (kDr; else neither);
//   dx[a][u] += r_u W_u[a] (kDx);
//   dY[m2] += sum_u r_u sum over the path's terms (a, m3 -> m2) of c * x_u[a] * g_u[m3], as
//             T[a][m3] = sum_u r_u x_u[a] g_u[m3] (dense, in registers) contracted with the terms once
//             per edge: into dyv (lane partials, summed over the lanes by the caller) and dys (the
//             channels past the last full vector).
template <typename T, int D1, int D3, bool kDr, bool kDx>
void backward_path(const ConvTPTables<T>& t, const ConvTPKernelPath& p, const T* m, const T* x, const T* g,
                   const T* r, T* dr, bool add_dr, T* dx, typename Simd<T>::V* dyv, T* dys) {
  using V = typename Simd<T>::V;
  constexpr int L = static_cast<int>(sizeof(V) / sizeof(T));
  constexpr int kD1 = D1 ? D1 : kMaxD, kD3 = D3 ? D3 : kMaxD;
  const int d1 = D1 ? D1 : p.d1, d3 = D3 ? D3 : p.d3, mul = p.mul;
  V tv[kD1 * kD3];
  T ts[kD1 * kD3];
  for (int k = 0; k < d1 * d3; ++k) {
    tv[k] = V{};
    ts[k] = 0;
  }
  int u0 = 0;
  for (; u0 + L <= mul; u0 += L) {
    const V rv = load<V>(r + u0);
    V gv[kD3];
    for (int m3 = 0; m3 < d3; ++m3) gv[m3] = load<V>(g + m3 * mul + u0);
    V acc = V{};
    for (int a = 0; a < d1; ++a) {
      V w = V{};
      for (int m3 = 0; m3 < d3; ++m3) w += m[a * d3 + m3] * gv[m3];
      if constexpr (kDx) store(dx + a * mul + u0, load<V>(dx + a * mul + u0) + rv * w);
      if constexpr (kDr) {
        const V xv = load<V>(x + a * mul + u0);
        acc += xv * w;
        const V rx = rv * xv;
        for (int m3 = 0; m3 < d3; ++m3) tv[a * d3 + m3] += rx * gv[m3];
      }
    }
    if constexpr (kDr) store(dr + u0, add_dr ? load<V>(dr + u0) + acc : acc);
  }
  for (; u0 < mul; ++u0) {
    T acc = 0;
    for (int a = 0; a < d1; ++a) {
      T w = 0;
      for (int m3 = 0; m3 < d3; ++m3) w += m[a * d3 + m3] * g[m3 * mul + u0];
      if constexpr (kDx) dx[a * mul + u0] += r[u0] * w;
      if constexpr (kDr) {
        acc += x[a * mul + u0] * w;
        for (int m3 = 0; m3 < d3; ++m3) ts[a * d3 + m3] += r[u0] * x[a * mul + u0] * g[m3 * mul + u0];
      }
    }
    if constexpr (kDr) dr[u0] = add_dr ? dr[u0] + acc : acc;
  }
  if constexpr (!kDr) return;
  for (int32_t q = p.run_begin[kConvTPByM2]; q < p.run_end[kConvTPByM2]; ++q)
    for (int32_t k = t.runs[q].term_begin; k < t.runs[q].term_end; ++k) {
      const int i = t.terms[k].a * d3 + t.terms[k].b, m2 = p.y_offset + t.runs[q].out;
      dyv[m2] += t.coeff[k] * tv[i];
      dys[m2] += t.coeff[k] * ts[i];
    }
}

template <typename T>
void forward_row(const ConvTPTables<T>& t, const ConvTPCouplings<T>& cm, const ConvTPEdges<T>& g, const T* xt,
                 int64_t row, T* out, T* m) {
  for (int64_t e0 = g.row_ptr[row]; e0 < g.row_ptr[row + 1]; e0 += kConvTPEdgeBlock) {
    const int64_t e1 = e0 + kConvTPEdgeBlock < g.row_ptr[row + 1] ? e0 + kConvTPEdgeBlock : g.row_ptr[row + 1];
    for (int64_t e = e0; e < e1; ++e) couplings(cm, t.dim_sh, g.Y + e * t.dim_sh, m + (e - e0) * cm.size);
    for (int i = 0; i < t.num_paths; ++i) {
      const ConvTPKernelPath& p = t.paths[i];
      with_shape(p.d1, p.d3, [&](auto s) {
        forward_path<T, decltype(s)::d1, decltype(s)::d3>(t, g, p, xt, e0, e1, m + cm.offset[i], cm.size,
                                                          out + p.mid_offset);
      });
    }
  }
}

// One edge's dR and dY (dr given) and its dx (dx given: the edge's sender row in [m][u]), every path from
// one M; each path's dx the same sums in the same order whether dR is computed beside it or not.
template <typename T>
void backward_edge(const ConvTPTables<T>& t, const ConvTPCouplings<T>& cm, const ConvTPEdges<T>& g,
                   const ConvTPGradients<T>& d, const T* xt, const T* gt, int64_t e, T* dr, bool add_dr, T* dx,
                   T* m) {
  using Vt = typename Simd<T>::V;
  const T* grow = gt + g.edge_row[e] * t.dim_mid;
  const T* x = xt + g.xindex[e] * t.dim_in1;
  const T* r = radial_row(t, g, e);
  couplings(cm, t.dim_sh, g.Y + e * t.dim_sh, m);
  Vt dyv[kMaxDimSh];
  T dys[kMaxDimSh];
  for (int m2 = 0; m2 < t.dim_sh; ++m2) {
    dyv[m2] = Vt{};
    dys[m2] = 0;
  }
  for (int i = 0; i < t.num_paths; ++i) {
    const ConvTPKernelPath& p = t.paths[i];
    with_shape(p.d1, p.d3, [&](auto s) {
      constexpr int D1 = decltype(s)::d1, D3 = decltype(s)::d3;
      const T* mp = m + cm.offset[i];
      const T* gp = grow + p.mid_offset;
      T* drp = dr ? dr + p.w_offset : nullptr;
      T* dxp = dx ? dx + p.x_offset : nullptr;
      if (dr && dx)
        backward_path<T, D1, D3, true, true>(t, p, mp, x + p.x_offset, gp, r + p.w_offset, drp, add_dr, dxp, dyv, dys);
      else if (dr)
        backward_path<T, D1, D3, true, false>(t, p, mp, x + p.x_offset, gp, r + p.w_offset, drp, add_dr, dxp, dyv, dys);
      else
        backward_path<T, D1, D3, false, true>(t, p, mp, x + p.x_offset, gp, r + p.w_offset, drp, add_dr, dxp, dyv, dys);
    });
  }
  if (!dr) return;
  T* dy = d.dY + e * t.dim_sh;
  for (int m2 = 0; m2 < t.dim_sh; ++m2) dy[m2] = lane_sum<T>(dyv[m2]) + dys[m2];
}

template <typename T>
void x_grad_row(const ConvTPTables<T>& t, const ConvTPCouplings<T>& cm, const ConvTPEdges<T>& g,
                const ConvTPGradients<T>& d, const T* gt, int64_t xr, T* dx, T* m) {
  for (int64_t j = d.x_ptr[xr]; j < d.x_ptr[xr + 1]; ++j) {
    const int64_t e = d.x_perm[j];
    const T* grow = gt + g.edge_row[e] * t.dim_mid;
    const T* r = radial_row(t, g, e);
    couplings(cm, t.dim_sh, g.Y + e * t.dim_sh, m);
    for (int i = 0; i < t.num_paths; ++i) {
      const ConvTPKernelPath& p = t.paths[i];
      with_shape(p.d1, p.d3, [&](auto s) {
        dx_path<T, decltype(s)::d1, decltype(s)::d3>(p, m + cm.offset[i], grow + p.mid_offset, r + p.w_offset, dx + p.x_offset);
      });
    }
  }
}

// The row's edges, each edge's dR, dY and dx from one sweep while the edge's R row and the receiver's g
// row are in cache.
template <typename T>
void backward_row(const ConvTPTables<T>& t, const ConvTPCouplings<T>& cm, const ConvTPEdges<T>& g,
                  const ConvTPGradients<T>& d, const T* xt, const T* gt, int64_t row, const ConvTPBackwardPass<T>& pass,
                  T* m) {
  for (int64_t e = g.row_ptr[row]; e < g.row_ptr[row + 1]; ++e) {
    const int64_t slot = pass.dr_slot ? pass.dr_slot[e] : -1;
    const bool add = slot < 0 && pass.rank && pass.rank[e] > 0;
    T* dr = slot >= 0 ? pass.waiting + slot * t.weight_numel
                      : d.dR + (pass.dr_by_radial_row ? g.radial_index[e] : e) * t.weight_numel;
    T* dx = pass.dx ? pass.dx + (g.xindex[e] - pass.x_begin) * t.dim_in1 : nullptr;
    backward_edge(t, cm, g, d, xt, gt, e, dr, add, dx, m);
  }
}

}  // namespace

#define FLASHMACE_DEFINE_ROWS(T)                                                                             \
  void conv_tp_forward_row(const ConvTPTables<T>& t, const ConvTPCouplings<T>& cm, const ConvTPEdges<T>& g,  \
                           const T* xt, int64_t row, T* out_mu, T* m) {                                      \
    forward_row(t, cm, g, xt, row, out_mu, m);                                                               \
  }                                                                                                          \
  void conv_tp_x_grad_row(const ConvTPTables<T>& t, const ConvTPCouplings<T>& cm, const ConvTPEdges<T>& g,   \
                          const ConvTPGradients<T>& d, const T* gt, int64_t xr, T* dx_mu, T* m) {            \
    x_grad_row(t, cm, g, d, gt, xr, dx_mu, m);                                                               \
  }                                                                                                          \
  void conv_tp_backward_row(const ConvTPTables<T>& t, const ConvTPCouplings<T>& cm, const ConvTPEdges<T>& g, \
                            const ConvTPGradients<T>& d, const T* xt, const T* gt, int64_t row,             \
                            const ConvTPBackwardPass<T>& pass, T* m) {                                      \
    backward_row(t, cm, g, d, xt, gt, row, pass, m);                                                         \
  }
FLASHMACE_DEFINE_ROWS(float)
FLASHMACE_DEFINE_ROWS(double)
#undef FLASHMACE_DEFINE_ROWS

}  // namespace FLASHMACE_CPU_ISA_NAMESPACE
}  // namespace flashmace
