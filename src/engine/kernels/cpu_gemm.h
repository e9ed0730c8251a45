#pragma once
// C = A B on the CPU for the backward pass of the radial MLP's output layer (radial_mm in
// engine/ops/edge_terms.h): A [M x K] and C [M x N] row-major with row strides lda and ldc, B's element
// (k, n) at B[k * b_k + n * b_n], so a transposed weight needs no copy. MKL (LibTorch's BLAS) runs that
// shape (N the MLP's width, 64; K = 1,280; M the radial rows) at 30-55 % of the FMA peak; here B is
// packed into panels of a few vectors' width that stay in cache while a thread's rows stream past.
// Each C element is summed over k in order, by one thread: the same bits whatever the thread count
// (the instruction set, FMA or not, may change the last bit).
#include <cstdint>

namespace flashmace {

template <typename T>
void cpu_gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t b_k, int64_t b_n, T* C,
              int64_t ldc);

}  // namespace flashmace
