#pragma once
// The per-row species_outer kernels of species_outer_cpu.cpp, compiled once per instruction set into
// the namespaces cpu_portable, cpu_avx2 and cpu_avx512 (species_outer_cpu_rows_impl.h):
//   forward_row:  S[row] (zeroed by the caller) += the row's edges' h x Y, per run of one sender slot
//   backward_row: dh[e], dY[e] written for the row's edges; scratch: H * J values
#include <cstdint>

#include "engine/kernels/species_outer_kernels.h"

namespace flashmace {

#define FLASHMACE_SPECIES_OUTER_CPU_ROWS(T)                                                           \
  void species_outer_forward_row(const SpeciesOuterArgs<T>& a, int64_t row, T* S);                    \
  void species_outer_backward_row(const SpeciesOuterArgs<T>& a, int64_t row, const T* dS, T* dh, T* dY, \
                                  T* scratch);

namespace cpu_portable {
FLASHMACE_SPECIES_OUTER_CPU_ROWS(float)
FLASHMACE_SPECIES_OUTER_CPU_ROWS(double)
}  // namespace cpu_portable
namespace cpu_avx2 {
FLASHMACE_SPECIES_OUTER_CPU_ROWS(float)
FLASHMACE_SPECIES_OUTER_CPU_ROWS(double)
}  // namespace cpu_avx2
namespace cpu_avx512 {
FLASHMACE_SPECIES_OUTER_CPU_ROWS(float)
FLASHMACE_SPECIES_OUTER_CPU_ROWS(double)
}  // namespace cpu_avx512

#undef FLASHMACE_SPECIES_OUTER_CPU_ROWS

}  // namespace flashmace
