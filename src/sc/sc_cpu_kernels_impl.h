#pragma once
// The SC executor's CPU loops (sc_cpu_kernels.h) for one instruction set: an sc_cpu_<isa>.cpp defines
// FLASHMACE_SC_CPU_NAMESPACE and includes this file with its own compiler flags. Per atom and tile of
// kTile channels (sc_cpu_tile; channels innermost: every loop below is a fixed-length loop over the tile that
// the compiler vectorises):
//   a[k][c]    = A[n, c, k]                                    gathered from the atom's mul_ir row
//   mono[j][c] = mono[parent(j)][c] * a[last(j)][c]            one multiply per monomial
//   acc[m,P]   = sum_{terms (m, j, P)} coeff * mono[j]         per block
//   B[n, c, m] = sum_P W[z_n, P, c] * acc[m, P][c]
// Backward is the reverse: g[m,P] = dB[m] * W[P], G[j] = sum_terms coeff * g[m,P], then the
// monomials in reverse order push G[j] into a[last(j)] and into their parent. Atoms are independent:
// one thread per atom (OpenMP when built with it), each with its own part of the scratch.
// Everything here has internal linkage or lives in the ISA namespace, and no standard-library
// template is instantiated: code compiled for one instruction set must never be linked in for another.
#include "sc/sc_cpu_kernels.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

#if !defined(FLASHMACE_SC_CPU_NAMESPACE)
#error "define FLASHMACE_SC_CPU_NAMESPACE before including sc_cpu_kernels_impl.h"
#endif

namespace flashmace {
namespace FLASHMACE_SC_CPU_NAMESPACE {

namespace {

int thread_index() {
#if defined(_OPENMP)
  return omp_get_thread_num();
#else
  return 0;
#endif
}

template <typename T>
void zero(T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = T(0);
}

// Gathers channels c0 .. c0 + nc of one atom's row into a[K][tile] (zero-padded) and evaluates every
// monomial.
template <typename T, int kTile>
void load_tile(const ScCpuTables<T>& t, const T* Ai, int c0, int nc, T* a, T* mono) {
  zero(a, static_cast<int64_t>(t.K) * kTile);
  for (int k = 0; k < t.K; ++k) {
    const T* column = Ai + t.in_base[k] + static_cast<int64_t>(t.in_stride[k]) * c0;
    for (int c = 0; c < nc; ++c) a[k * kTile + c] = column[c * t.in_stride[k]];
  }
  for (int j = 0; j < t.num_monomials; ++j) {
    T* mj = &mono[j * kTile];
    const T* ak = &a[t.last[j] * kTile];
    if (t.parent[j] < 0) {
      for (int c = 0; c < kTile; ++c) mj[c] = ak[c];
    } else {
      const T* mp = &mono[t.parent[j] * kTile];
      for (int c = 0; c < kTile; ++c) mj[c] = mp[c] * ak[c];
    }
  }
}

template <typename T, int kTile>
void forward(const ScCpuTables<T>& t, const T* A, const int64_t* species, int64_t n, T* B, T* scratch) {
  const int K = t.K, C = t.C;
#if defined(_OPENMP)
#pragma omp parallel
#endif
  {
    T* a = scratch + thread_index() * t.scratch_per_thread;
    T* mono = a + K * kTile;
    T* acc = mono + t.num_monomials * kTile;
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (int64_t i = 0; i < n; ++i) {
      const T* Ai = A + i * C * K;
      T* Bi = B + i * t.out_dim;
      for (int c0 = 0; c0 < C; c0 += kTile) {
        const int nc = C - c0 < kTile ? C - c0 : kTile;
        load_tile<T, kTile>(t, Ai, c0, nc, a, mono);
        for (int bi = 0; bi < t.num_blocks; ++bi) {
          const ScCpuBlock<T>& b = t.blocks[bi];
          zero(acc, static_cast<int64_t>(b.dim) * b.total_paths * kTile);
          for (int q = 0; q < b.num_terms; ++q) {
            const T coeff = b.term_coeff[q];
            const T* mj = &mono[b.term_mono[q] * kTile];
            T* s = &acc[b.term_slot[q] * kTile];
            for (int c = 0; c < kTile; ++c) s[c] += coeff * mj[c];
          }
          const T* W = &b.weights[species[i] * b.total_paths * C + c0];
          for (int m = 0; m < b.dim; ++m) {
            T out[kTile] = {};
            for (int p = 0; p < b.total_paths; ++p) {
              const T* s = &acc[(m * b.total_paths + p) * kTile];
              const T* w = W + p * C;
              for (int c = 0; c < nc; ++c) out[c] += w[c] * s[c];
            }
            for (int c = 0; c < nc; ++c) Bi[b.out_offset + (c0 + c) * b.dim + m] = out[c];
          }
        }
      }
    }
  }
}

template <typename T, int kTile>
void backward(const ScCpuTables<T>& t, const T* A, const int64_t* species, const T* dB, int64_t n, T* dA,
              T* scratch) {
  const int K = t.K, C = t.C, J = t.num_monomials;
#if defined(_OPENMP)
#pragma omp parallel
#endif
  {
    T* a = scratch + thread_index() * t.scratch_per_thread;
    T* da = a + K * kTile;
    T* mono = da + K * kTile;
    T* grad = mono + J * kTile;
    T* g = grad + J * kTile;
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (int64_t i = 0; i < n; ++i) {
      const T* Ai = A + i * C * K;
      const T* dBi = dB + i * t.out_dim;
      T* dAi = dA + i * C * K;
      for (int c0 = 0; c0 < C; c0 += kTile) {
        const int nc = C - c0 < kTile ? C - c0 : kTile;
        load_tile<T, kTile>(t, Ai, c0, nc, a, mono);
        zero(grad, static_cast<int64_t>(J) * kTile);
        for (int bi = 0; bi < t.num_blocks; ++bi) {
          const ScCpuBlock<T>& b = t.blocks[bi];
          const T* W = &b.weights[species[i] * b.total_paths * C + c0];
          for (int m = 0; m < b.dim; ++m) {
            T dbm[kTile] = {};
            for (int c = 0; c < nc; ++c) dbm[c] = dBi[b.out_offset + (c0 + c) * b.dim + m];
            for (int p = 0; p < b.total_paths; ++p) {
              T* s = &g[(m * b.total_paths + p) * kTile];
              const T* w = W + p * C;
              for (int c = 0; c < nc; ++c) s[c] = w[c] * dbm[c];
              for (int c = nc; c < kTile; ++c) s[c] = T(0);
            }
          }
          for (int q = 0; q < b.num_terms; ++q) {
            const T coeff = b.term_coeff[q];
            const T* s = &g[b.term_slot[q] * kTile];
            T* gj = &grad[b.term_mono[q] * kTile];
            for (int c = 0; c < kTile; ++c) gj[c] += coeff * s[c];
          }
        }
        zero(da, static_cast<int64_t>(K) * kTile);
        for (int j = J - 1; j >= 0; --j) {
          const T* gj = &grad[j * kTile];
          T* dak = &da[t.last[j] * kTile];
          if (t.parent[j] < 0) {
            for (int c = 0; c < kTile; ++c) dak[c] += gj[c];
          } else {
            const T* mp = &mono[t.parent[j] * kTile];
            const T* ak = &a[t.last[j] * kTile];
            T* gp = &grad[t.parent[j] * kTile];
            for (int c = 0; c < kTile; ++c) {
              dak[c] += gj[c] * mp[c];
              gp[c] += gj[c] * ak[c];
            }
          }
        }
        for (int k = 0; k < K; ++k) {
          T* column = dAi + t.in_base[k] + static_cast<int64_t>(t.in_stride[k]) * c0;
          for (int c = 0; c < nc; ++c) column[c * t.in_stride[k]] = da[k * kTile + c];
        }
      }
    }
  }
}

}  // namespace

// (the tile sizes sc_cpu_tile gives)
#define FLASHMACE_DEFINE_SC_CPU(T)                                                                          \
  void sc_cpu_forward(const ScCpuTables<T>& t, const T* A, const int64_t* species, int64_t n, T* B,          \
                      T* scratch) {                                                                         \
    constexpr int kWide = kScCpuWideTileBytes / static_cast<int>(sizeof(T));                                \
    if (t.tile == kWide) return forward<T, kWide>(t, A, species, n, B, scratch);                            \
    forward<T, kScCpuNarrowTile>(t, A, species, n, B, scratch);                                             \
  }                                                                                                         \
  void sc_cpu_backward(const ScCpuTables<T>& t, const T* A, const int64_t* species, const T* dB, int64_t n, \
                       T* dA, T* scratch) {                                                                 \
    constexpr int kWide = kScCpuWideTileBytes / static_cast<int>(sizeof(T));                                \
    if (t.tile == kWide) return backward<T, kWide>(t, A, species, dB, n, dA, scratch);                      \
    backward<T, kScCpuNarrowTile>(t, A, species, dB, n, dA, scratch);                                       \
  }
FLASHMACE_DEFINE_SC_CPU(float)
FLASHMACE_DEFINE_SC_CPU(double)
#undef FLASHMACE_DEFINE_SC_CPU

}  // namespace FLASHMACE_SC_CPU_NAMESPACE
}  // namespace flashmace
