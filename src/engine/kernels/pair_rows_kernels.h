#pragma once
// sum_pair_rows (radial_pairs.h) on CUDA in one kernel: out[u, :] = x[first[u], :] (+ x[second[u], :]
// where second[u] >= 0), the two added in that order, as the ATen formulation on the CPU (two
// gathers, an add and a select: the same bits). Torch-free: device pointers and a cudaStream_t.
#include <cstdint>

namespace flashmace {

template <typename T>
void pair_rows_sum_cuda(const T* x, const int64_t* first, const int64_t* second, int64_t rows, int64_t width, T* out,
                        void* stream);

}  // namespace flashmace
