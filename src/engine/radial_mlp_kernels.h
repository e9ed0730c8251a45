#pragma once
// The radial MLP's hidden layers (edge_terms.h: one GEMM and one silu per layer, weights folded) in
// one CUDA launch each way, instead of a GEMM and an elementwise kernel per layer (and the pair
// gathers around them): at small systems those launches cost more than their arithmetic.
//   forward: rows r of ef (ef row index[r], or r) through every hidden layer:
//            pre_k = a_{k-1} W_k (a_{-1} = ef, a_k = silu(pre_k)); writes every pre_k and h = a_last.
//   vjp:     from dE/dh per row (the sum of two rows of a per-edge gradient, first[r] + second[r],
//            when pairs are given; second < 0: first alone) back to d(ef) per row.
// A thread carries one row's activations through every layer in registers; a block stages one
// layer's weights at a time in shared memory, read as broadcast 16-byte vectors, so the arithmetic
// runs at the FMA rate. float32 only (a float64 row of activations and outputs does not fit the
// registers): float64 keeps the GEMMs. Widths up to kRadialMlpMaxWidth.
// Torch-free: plain device pointers and a cudaStream_t.
#include <cstdint>

namespace flashmace {

constexpr int kRadialMlpMaxWidth = 64;  // every layer's input and output width
constexpr int kRadialMlpMaxLayers = 8;  // hidden layers

struct RadialMlpArgs {
  int layers = 0;                               // hidden layers L
  int width[kRadialMlpMaxLayers + 1] = {};      // width[0] = n_basis, width[k + 1] = layer k's output
  const float* weight[kRadialMlpMaxLayers] = {};  // layer k: [width[k], width[k + 1]] row-major (folded)
  int64_t rows = 0;
};

// ef [*, width[0]] (rows index[r], or r when index is null); pre: L pointers to [rows, width[k+1]];
// h [rows, width[L]].
void radial_mlp_forward_cuda(const RadialMlpArgs& a, const float* ef, const int64_t* index, float* const* pre,
                             float* h, void* stream);

// grad [*, width[L]] (row r: grad[first[r]] (+ grad[second[r]] if >= 0), or grad[r] when first is
// null); pre as written by the forward; d_ef [rows, width[0]].
void radial_mlp_vjp_cuda(const RadialMlpArgs& a, const float* const* pre, const float* grad, const int64_t* first,
                         const int64_t* second, float* d_ef, void* stream);

}  // namespace flashmace
