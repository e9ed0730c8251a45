// cpu_gemm.h: B packed once per call into panels (zero past column N), the rows of A cut into blocks
// whose rows stay in L2 while every panel passes over them, a thread per block (OpenMP when built with
// it), the row kernels of the instruction set cpu_isa() names (cpu_gemm_rows.h).
#include "engine/kernels/cpu_gemm.h"

#include <algorithm>
#include <vector>

#include "core/cpu_isa.h"
#include "engine/kernels/cpu_gemm_rows.h"

namespace flashmace {

namespace {

template <typename T>
struct GemmKernels {
  int (*width)(T);
  void (*rows)(const GemmRows<T>&, int64_t, int64_t);
};

template <typename T>
GemmKernels<T> gemm_kernels() {
  // (cpu_isa() names only instruction sets built into this binary)
#if FLASHMACE_CPU_X86_VARIANTS
  switch (cpu_isa()) {
    case CpuIsa::avx512:
      return {cpu_avx512::gemm_panel_width, cpu_avx512::gemm_rows};
    case CpuIsa::avx2:
      return {cpu_avx2::gemm_panel_width, cpu_avx2::gemm_rows};
    case CpuIsa::portable:
      break;
  }
#else
  static_cast<void>(cpu_isa());
#endif
  return {cpu_portable::gemm_panel_width, cpu_portable::gemm_rows};
}

// Rows per block: a block of A within ~128 KB (half an L2), a multiple of every kernel's tile rows
// (6 and 12), at most 96.
int64_t block_rows(int64_t K, std::size_t value_bytes) {
  const int64_t fit = 131072 / std::max<int64_t>(1, K * static_cast<int64_t>(value_bytes));
  return std::clamp<int64_t>(fit / 12 * 12, 12, 96);
}

}  // namespace

template <typename T>
void cpu_gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t b_k, int64_t b_n, T* C,
              int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  const GemmKernels<T> kernels = gemm_kernels<T>();
  const int64_t W = kernels.width(T{}), panels = (N + W - 1) / W;
  std::vector<T> packed(static_cast<std::size_t>(panels * K * W), T(0));
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < W && p * W + j < N; ++j) packed[(p * K + k) * W + j] = B[k * b_k + (p * W + j) * b_n];
  const GemmRows<T> g{N, K, A, lda, packed.data(), C, ldc};
  const int64_t rows = block_rows(K, sizeof(T)), blocks = (M + rows - 1) / rows;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (int64_t b = 0; b < blocks; ++b) kernels.rows(g, b * rows, std::min(M, (b + 1) * rows));
}

template void cpu_gemm<float>(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, int64_t, float*,
                              int64_t);
template void cpu_gemm<double>(int64_t, int64_t, int64_t, const double*, int64_t, const double*, int64_t, int64_t,
                               double*, int64_t);

}  // namespace flashmace
