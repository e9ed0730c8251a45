#pragma once
// The radial MLP's hidden layers (edge_terms.h: one GEMM and one silu per layer, weights folded) in
// one CUDA launch each way, instead of a GEMM and an elementwise kernel per layer (and the pair
// gathers around them): at small systems those launches cost more than their arithmetic.
//   forward: rows r of ef (ef row index[r], or r) through every hidden layer:
//            pre_k = a_{k-1} W_k (a_{-1} = ef, a_k = silu(pre_k)); writes every pre_k and h = a_last.
//   vjp:     from dE/dh per row (the sum of two rows of a per-edge gradient, first[r] + second[r],
//            when pairs are given; second < 0: first alone) back to d(ef) per row.
// A block keeps a tile of rows in shared memory and runs the layers one after the other as small
// tile GEMMs, so the activations never leave the chip between layers. Widths up to kRadialMlpMaxWidth.
// Torch-free: plain device pointers and a cudaStream_t.
#include <cstdint>

namespace flashmace {

constexpr int kRadialMlpMaxWidth = 64;  // every layer's input and output width
constexpr int kRadialMlpMaxLayers = 8;  // hidden layers

template <typename T>
struct RadialMlpArgs {
  int layers = 0;                               // hidden layers L
  int width[kRadialMlpMaxLayers + 1] = {};      // width[0] = n_basis, width[k + 1] = layer k's output
  const T* weight[kRadialMlpMaxLayers] = {};    // layer k: [width[k], width[k + 1]] row-major (folded)
  int64_t rows = 0;
};

// ef [*, width[0]] (rows index[r], or r when index is null); pre: L pointers to [rows, width[k+1]];
// h [rows, width[L]].
template <typename T>
void radial_mlp_forward_cuda(const RadialMlpArgs<T>& a, const T* ef, const int64_t* index, T* const* pre, T* h,
                             void* stream);

// grad [*, width[L]] (row r: grad[first[r]] (+ grad[second[r]] if >= 0), or grad[r] when first is
// null); pre as written by the forward; d_ef [rows, width[0]].
template <typename T>
void radial_mlp_vjp_cuda(const RadialMlpArgs<T>& a, const T* const* pre, const T* grad, const int64_t* first,
                         const int64_t* second, T* d_ef, void* stream);

}  // namespace flashmace
