#pragma once
// The per-edge part of the reassociated first interaction (first_layer.h), CPU and CUDA:
//   forward:  S[j, row, z, k] = sum over the row's edges e with sender slot z of h[e, k] Y[e, j]
//             (CPU: thread per row; CUDA: block per row, thread per k; edges in order, sums in
//             double: deterministic);
//   backward: dh[e, k] = sum_j dS[j, row(e), z(e), k] Y[e, j],  dY[e, j] = sum_k h[e, k] dS[j, ..., k]
//             (CPU: thread per row; CUDA: block per row, or thread per edge for many slots).
// S is harmonic-major so that each harmonic's [rows, Z H] block is one GEMM operand of the per-row
// aggregate (first_layer.h).
// h [E, H] (or [any, H] with h_index: edge e reads row h_index[e]; dh stays per edge), Y [E, J],
// slot [E] in [0, Z), row_ptr [nrows + 1] (edges sorted by row), edge_row [E] (CUDA's per-edge
// kernel only; the others cover the edges of rows, row_ptr[nrows] = E);
// S, dS [J, S rows, Z, H], stride_j = S rows x Z x H (S may have more rows than row_ptr covers).
// Torch-free: plain pointers (CUDA: device memory and a cudaStream_t).
#include <cstdint>

namespace flashmace {

// Harmonic counts J the kernels are compiled for: (l_max + 1)^2 for l_max = 0..4.
constexpr bool species_outer_supports(int J) { return J == 1 || J == 4 || J == 9 || J == 16 || J == 25; }

template <typename T>
struct SpeciesOuterArgs {
  const T* h = nullptr;
  const int64_t* h_index = nullptr;
  const T* Y = nullptr;
  const int64_t* slot = nullptr;
  const int64_t* row_ptr = nullptr;
  const int64_t* edge_row = nullptr;
  int64_t nrows = 0, num_edges = 0;
  int64_t stride_j = 0;  // elements between harmonics j and j + 1 of S or dS
  int Z = 0, H = 0, J = 0;
};

template <typename T>
void species_outer_forward_cpu(const SpeciesOuterArgs<T>& a, T* S);
template <typename T>
void species_outer_backward_cpu(const SpeciesOuterArgs<T>& a, const T* dS, T* dh, T* dY);
// Whether the CUDA backward stages the rows' dS slabs in shared memory (else it runs a thread per
// edge and needs edge_row).
template <typename T>
bool species_outer_cuda_stages_slabs(int Z, int H, int J);
template <typename T>
void species_outer_forward_cuda(const SpeciesOuterArgs<T>& a, T* S, void* stream);
template <typename T>
void species_outer_backward_cuda(const SpeciesOuterArgs<T>& a, const T* dS, T* dh, T* dY, void* stream);

}  // namespace flashmace
