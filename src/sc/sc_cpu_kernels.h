#pragma once
// The SC executor's CPU loops (sc_cpu_executor.h), compiled once per instruction set into the
// namespaces sc_cpu_portable, sc_cpu_avx2 and sc_cpu_avx512 (sc_cpu_kernels_impl.h) and picked at
// run time (core/cpu_isa.h). They read the executor's tables through plain pointers.
#include <cstdint>

namespace flashmace {

// Channels per tile: kScCpuWideTileBytes of them (64 float32, 32 float64) when the model has that
// many, else kScCpuNarrowTile. A wide tile spreads each term's index and coefficient loads over
// several vectors; the monomial values of a tile (up to 968 for K = 16, nu = 3) stay in L2.
constexpr int kScCpuWideTileBytes = 256;
constexpr int kScCpuNarrowTile = 16;
template <typename T>
constexpr int sc_cpu_tile(int channels) {
  return channels >= kScCpuWideTileBytes / static_cast<int>(sizeof(T)) ? kScCpuWideTileBytes / static_cast<int>(sizeof(T))
                                                                       : kScCpuNarrowTile;
}

template <typename T>
struct ScCpuBlock {
  int dim = 0, out_offset = 0, total_paths = 0, num_terms = 0;
  const T* weights = nullptr;            // [Z, total_paths, C]
  const int32_t* term_mono = nullptr;    // [num_terms]
  const int32_t* term_slot = nullptr;    // [num_terms]: m * total_paths + path
  const T* term_coeff = nullptr;         // [num_terms]
};

template <typename T>
struct ScCpuTables {
  int K = 0, C = 0, out_dim = 0;
  int num_monomials = 0;
  const int32_t* parent = nullptr;  // [num_monomials]: the monomial it extends (-1: none)
  const int32_t* last = nullptr;    // [num_monomials]: the component it multiplies in
  const int32_t* in_base = nullptr;    // [K]: sc_input_columns (A's and dA's rows are mul_ir)
  const int32_t* in_stride = nullptr;  // [K]
  int num_blocks = 0;
  const ScCpuBlock<T>* blocks = nullptr;
  int tile = kScCpuNarrowTile;  // sc_cpu_tile<T>(C)
  // Scratch values per thread (forward and backward alike), at scratch + thread * per_thread.
  int64_t scratch_per_thread = 0;
};

#define FLASHMACE_DECLARE_SC_CPU(NS)                                                                      \
  namespace NS {                                                                                         \
  void sc_cpu_forward(const ScCpuTables<float>& t, const float* A, const int64_t* species, int64_t n,     \
                      float* B, float* scratch);                                                         \
  void sc_cpu_forward(const ScCpuTables<double>& t, const double* A, const int64_t* species, int64_t n,   \
                      double* B, double* scratch);                                                       \
  void sc_cpu_backward(const ScCpuTables<float>& t, const float* A, const int64_t* species, const float* dB, \
                       int64_t n, float* dA, float* scratch);                                            \
  void sc_cpu_backward(const ScCpuTables<double>& t, const double* A, const int64_t* species,             \
                       const double* dB, int64_t n, double* dA, double* scratch);                        \
  }
FLASHMACE_DECLARE_SC_CPU(sc_cpu_portable)
FLASHMACE_DECLARE_SC_CPU(sc_cpu_avx2)
FLASHMACE_DECLARE_SC_CPU(sc_cpu_avx512)
#undef FLASHMACE_DECLARE_SC_CPU

}  // namespace flashmace
