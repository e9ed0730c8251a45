#pragma once
// Internal to src/sc: the generic CUDA executor's per-thread computation and its tables, shared
// with the host so the CPU tests run exactly the code the GPU runs (no CUDA headers here).
// One thread = one (atom i, channel c), tid = i * C + c. Per block o, terms sorted by (path, m):
//   forward:  B[i, off_o + c*(2l+1) + m] = sum_(P,m) W[z_i, P, c] * sum_terms coeff * prod_q a[k_q]
//   backward: dA[i, c, k] = sum_terms coeff * W[z_i, P, c] * dB[i, off_o + c*(2l+1) + m] * d(prod_q a[k_q])/da[k]
// with a[k] = A[i, c, k] read from the atom's mul_ir row (sc_input_columns), dA written there.
// Scratch: the thread's K values of a (and dA, or its block's outputs) at `stride` apart (the
// thread's column of shared memory on the GPU, a plain array on the host).
#include <cstdint>
#include <vector>

#include "sc/sc_descriptor.h"

#ifdef __CUDACC__
#define FLASHMACE_HD __host__ __device__
#else
#define FLASHMACE_HD
#endif

namespace flashmace::sc_detail {

constexpr int kGenericMaxDegree = 4;  // four 8-bit component indices packed per term
constexpr unsigned kGenericNoIndex = 0xff;
constexpr int kGenericMaxDim = 32;    // m is packed in 5 bits

struct GenericBlock {
  int dim, out_offset, term_begin, term_end;
};

template <typename T>
struct GenericTables {  // pointers to device (or host) copies of GenericHostTables
  const GenericBlock* blocks;
  int num_blocks;
  const unsigned* term_k;  // k_q in byte q, kGenericNoIndex past the degree
  const int* term_pm;      // (packed path << 5) | m
  const T* term_coeff;
  const T* W;              // pack_sc_weights: [Z, PW, C]
  const int* in_base;      // sc_input_columns: [K]
  const int* in_stride;    // [K]
  int K, C, Z, PW, out_dim, max_dim;
};

template <typename T>
struct GenericHostTables {
  std::vector<GenericBlock> blocks;
  std::vector<unsigned> term_k;
  std::vector<int> term_pm;
  std::vector<T> term_coeff;
  std::vector<T> W;
  std::vector<int> in_base, in_stride;
  int K = 0, C = 0, Z = 0, PW = 0, out_dim = 0, max_dim = 1;
  GenericTables<T> view() const {
    return {blocks.data(), static_cast<int>(blocks.size()), term_k.data(), term_pm.data(), term_coeff.data(),
            W.data(), in_base.data(), in_stride.data(), K, C, Z, PW, out_dim, max_dim};
  }
};

// Empty string when the descriptor fits the packing (correlation <= 4, K <= 255, 2l+1 <= 32),
// else why not.
std::string generic_unsupported(const ScDescriptor& d);
template <typename T>
GenericHostTables<T> build_generic_tables(const ScDescriptor& d);

template <typename T>
FLASHMACE_HD T generic_monomial(unsigned k, const T* a, int stride) {
  T v = a[(k & 0xff) * stride];
  for (int q = 1; q < kGenericMaxDegree; ++q) {
    const unsigned kq = (k >> (8 * q)) & 0xff;
    if (kq != kGenericNoIndex) v *= a[kq * stride];
  }
  return v;
}

// scratch: (K + max_dim) values at `stride` apart.
template <typename T>
FLASHMACE_HD void generic_forward_thread(const GenericTables<T>& t, const T* A, const long long* species, T* B,
                                         long long tid, T* scratch, int stride) {
  const long long i = tid / t.C;
  const int c = static_cast<int>(tid % t.C);
  const long long z = species[i];
  const bool bad = z < 0 || z >= t.Z;
  T* a = scratch;
  T* out = scratch + t.K * stride;
  const T* row = A + i * t.C * t.K;
  for (int k = 0; k < t.K; ++k) a[k * stride] = row[t.in_base[k] + t.in_stride[k] * c];
  const T* w = t.W + (bad ? 0 : z) * static_cast<long long>(t.PW) * t.C + c;
  T* b = B + i * t.out_dim + c;  // + off + c*(2l+1) + m - c
  for (int o = 0; o < t.num_blocks; ++o) {
    const GenericBlock blk = t.blocks[o];
    for (int m = 0; m < blk.dim; ++m) out[m * stride] = T(0);
    int cur = -1;
    T s = T(0);
    for (int q = blk.term_begin; q < blk.term_end; ++q) {
      const int pm = t.term_pm[q];
      if (pm != cur) {
        if (cur >= 0) out[(cur & 31) * stride] += w[static_cast<long long>(cur >> 5) * t.C] * s;
        cur = pm;
        s = T(0);
      }
      s += t.term_coeff[q] * generic_monomial(t.term_k[q], a, stride);
    }
    if (cur >= 0) out[(cur & 31) * stride] += w[static_cast<long long>(cur >> 5) * t.C] * s;
    for (int m = 0; m < blk.dim; ++m)
      b[blk.out_offset + blk.dim * c - c + m] = bad ? T(0) / T(0) : out[m * stride];
  }
}

// scratch: 2K values at `stride` apart.
template <typename T>
FLASHMACE_HD void generic_backward_thread(const GenericTables<T>& t, const T* A, const long long* species,
                                          const T* dB, T* dA, long long tid, T* scratch, int stride) {
  const long long i = tid / t.C;
  const int c = static_cast<int>(tid % t.C);
  const long long z = species[i];
  const bool bad = z < 0 || z >= t.Z;
  T* a = scratch;
  T* da = scratch + t.K * stride;
  const T* row = A + i * t.C * t.K;
  for (int k = 0; k < t.K; ++k) {
    a[k * stride] = row[t.in_base[k] + t.in_stride[k] * c];
    da[k * stride] = T(0);
  }
  const T* w = t.W + (bad ? 0 : z) * static_cast<long long>(t.PW) * t.C + c;
  const T* db = dB + i * t.out_dim + c;
  for (int o = 0; o < t.num_blocks; ++o) {
    const GenericBlock blk = t.blocks[o];
    int cur = -1;
    T g = T(0);
    for (int q = blk.term_begin; q < blk.term_end; ++q) {
      const int pm = t.term_pm[q];
      if (pm != cur) {
        cur = pm;
        g = w[static_cast<long long>(cur >> 5) * t.C] * db[blk.out_offset + blk.dim * c - c + (cur & 31)];
      }
      const unsigned k = t.term_k[q];
      const T gt = t.term_coeff[q] * g;
      // d/da[k_p] of the product: the product of the other factors.
      for (int p = 0; p < kGenericMaxDegree; ++p) {
        const unsigned kp = (k >> (8 * p)) & 0xff;
        if (kp == kGenericNoIndex) break;
        T others = gt;
        for (int r = 0; r < kGenericMaxDegree; ++r) {
          const unsigned kr = (k >> (8 * r)) & 0xff;
          if (r != p && kr != kGenericNoIndex) others *= a[kr * stride];
        }
        da[kp * stride] += others;
      }
    }
  }
  T* da_row = dA + i * t.C * t.K;
  for (int k = 0; k < t.K; ++k) da_row[t.in_base[k] + t.in_stride[k] * c] = bad ? T(0) / T(0) : da[k * stride];
}

}  // namespace flashmace::sc_detail
