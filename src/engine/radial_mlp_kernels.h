#pragma once
// The radial MLP's hidden layers (edge_terms.h: one GEMM and one silu per layer, weights folded) in
// one CUDA launch each way, instead of a GEMM and an elementwise kernel per layer (and the pair
// gathers around them): at small systems those launches cost more than their arithmetic.
//   forward: rows r of ef (ef row index[r], or r) through every hidden layer:
//            pre_k = a_{k-1} W_k (a_{-1} = ef, a_k = silu(pre_k)); writes every pre_k and h = a_last.
//   vjp:     from dE/dh per row (the sum of two rows of a per-edge gradient, first[r] + second[r],
//            when pairs are given; second < 0: first alone) back to d(ef) per row.
// A thread carries one row through every layer in registers and reads the weights, zero-padded to
// kRadialMlpMaxWidth squared per layer, four at a time at addresses every lane shares (one cached
// load serves the warp): no shared memory, no barriers. float32 only (a float64 row and its outputs
// do not fit the registers): float64 keeps the GEMMs.
// Torch-free: plain device pointers and a cudaStream_t.
#include <cstdint>

namespace flashmace {

constexpr int kRadialMlpMaxWidth = 64;  // every layer's input and output width
constexpr int kRadialMlpMaxLayers = 8;  // hidden layers

struct RadialMlpArgs {
  int layers = 0;                           // hidden layers L
  int width[kRadialMlpMaxLayers + 1] = {};  // width[0] = n_basis, width[k + 1] = layer k's output
  // [2L, 64, 64]: layer k's weights [width[k], width[k + 1]] zero-padded, then (at L + k) their transposes
  const float* table = nullptr;
  int64_t rows = 0;
  int64_t ef_stride = 0;    // row stride of ef
  int64_t grad_stride = 0;  // row stride of the vjp's gradient
};

// ef rows of width[0] (rows index[r], or r when index is null); pre: L pointers to [rows, 64] (row
// stride 64, zeros beyond width[k+1]); h [rows, 64] likewise.
void radial_mlp_forward_cuda(const RadialMlpArgs& a, const float* ef, const int64_t* index, float* const* pre,
                             float* h, void* stream);

// grad rows of width[L] (row r: grad[first[r]] (+ grad[second[r]] if >= 0), or grad[r] when first is
// null); pre as written by the forward; d_ef [rows, width[0]].
void radial_mlp_vjp_cuda(const RadialMlpArgs& a, const float* const* pre, const float* grad, const int64_t* first,
                         const int64_t* second, float* d_ef, void* stream);

}  // namespace flashmace
