#pragma once
// The per-row part of the reassociated first interaction (first_layer.h) on CUDA, per path p:
//   forward:  agg[row, mid_p + u d3 + m3] = sum_{entries (m2, m3, c) of p} c
//                 sum_z x[z, x_p + u] sum_k W[k, w_p + u] S[row, z, k, y_p + m2]
//   backward: dS[row, z, k, y_p + m2] = sum_u x[z, x_p + u] W[k, w_p + u] G[row, p, u, m2],
//             G[row, p, u, m2] = sum_{entries (m2, m3, c) of p} c dagg[row, mid_p + u d3 + m3]
// A block per (a few rows, one path), the 2l + 1 of the path a compile-time constant: forward
// threads over four channels each, the rows' S[.., y_p : y_p + d2] slab in shared memory, one W row
// load serving 4 x rows x d2 products; backward threads over k, the rows' G in shared memory, W
// read transposed (coalesced over k). This replaces ~30 small ATen launches (per-path batched
// matmuls, GEMMs, products, sums, copies), which the CPU keeps. No atomics: deterministic. The
// backward writes only the harmonics some path reads (the caller zeroes dS when one is unread) and
// needs each harmonic read by at most one path. Torch-free: plain pointers into device memory.
#include <cstdint>

namespace flashmace {

// Largest 2l + 1 of a harmonic or output block the kernels take (l <= 4).
constexpr int kFirstLayerMaxDim = 9;

// One path's columns, as in ConvTPPathDescriptor, packed as ints for the device.
struct FirstLayerPath {
  int x_offset, y_offset, mid_offset, w_offset, mul, d2, d3, entry_begin, entry_end;
};

template <typename T>
struct FirstLayerArgs {
  const FirstLayerPath* paths = nullptr;  // [P], device
  const int* entry_m = nullptr;           // [entries, 2]: m2, m3, device
  const T* entry_c = nullptr;             // [entries]: alpha times the Wigner-3j entry, device
  int num_paths = 0;
  int max_mul = 0;                        // largest path multiplicity
  const T* x = nullptr;                   // [Z, x_stride] per-slot input features
  int Z = 0, x_stride = 0;
  const T* w = nullptr;                   // [H, w_stride] the radial MLP's output layer
  const T* wt = nullptr;                  // its transpose [w_stride, H]
  int H = 0, w_stride = 0;
  int J = 0, dim_mid = 0;                 // harmonic count, aggregate width
  int64_t nrows = 0;
};

// Whether the kernels take a layer of H hidden channels and paths of at most max_mul channels
// (threads per block, shared memory); else the caller keeps the ATen formulation.
bool first_layer_cuda_supports(int H, int max_mul, bool float64);
template <typename T>
void first_layer_aggregate_cuda(const FirstLayerArgs<T>& a, const T* S, T* agg, void* stream);
template <typename T>
void first_layer_aggregate_backward_cuda(const FirstLayerArgs<T>& a, const T* dagg, T* dS, void* stream);

}  // namespace flashmace
