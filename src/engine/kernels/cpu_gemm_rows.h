#pragma once
// The row-block kernels of cpu_gemm.cpp, compiled once per instruction set into the namespaces
// cpu_portable, cpu_avx2 and cpu_avx512 (cpu_gemm_rows_impl.h):
//   gemm_panel_width<T>(): the columns of one packed panel of B (a few vectors);
//   gemm_rows: C[rows, 0:N) = A[rows, 0:K) Bp for the rows [r0, r1), Bp packed by the caller as
//              Bp[panel][k][width] (zero past column N).
#include <cstdint>

namespace flashmace {

template <typename T>
struct GemmRows {
  int64_t N, K;
  const T* A;
  int64_t lda;
  const T* Bp;  // [ceil(N / width)][K][width]
  T* C;
  int64_t ldc;
};

#define FLASHMACE_GEMM_CPU_ROWS(T) \
  int gemm_panel_width(T);         \
  void gemm_rows(const GemmRows<T>& g, int64_t r0, int64_t r1);

namespace cpu_portable {
FLASHMACE_GEMM_CPU_ROWS(float)
FLASHMACE_GEMM_CPU_ROWS(double)
}  // namespace cpu_portable
namespace cpu_avx2 {
FLASHMACE_GEMM_CPU_ROWS(float)
FLASHMACE_GEMM_CPU_ROWS(double)
}  // namespace cpu_avx2
namespace cpu_avx512 {
FLASHMACE_GEMM_CPU_ROWS(float)
FLASHMACE_GEMM_CPU_ROWS(double)
}  // namespace cpu_avx512

#undef FLASHMACE_GEMM_CPU_ROWS

}  // namespace flashmace
