// species_outer_kernels.h on the CPU: a thread per row (OpenMP when built with it), the row kernels of
// the instruction set cpu_isa() names (species_outer_cpu_rows.h).
#include <vector>

#include "core/cpu_isa.h"
#include "engine/kernels/species_outer_cpu_rows.h"

namespace flashmace {

namespace {

template <typename T>
struct OuterRowKernels {
  void (*forward)(const SpeciesOuterArgs<T>&, int64_t, T*);
  void (*backward)(const SpeciesOuterArgs<T>&, int64_t, const T*, T*, T*, T*);
};

template <typename T>
OuterRowKernels<T> outer_row_kernels() {
  // (cpu_isa() names only instruction sets built into this binary)
#if FLASHMACE_CPU_X86_VARIANTS
  switch (cpu_isa()) {
    case CpuIsa::avx512:
      return {cpu_avx512::species_outer_forward_row, cpu_avx512::species_outer_backward_row};
    case CpuIsa::avx2:
      return {cpu_avx2::species_outer_forward_row, cpu_avx2::species_outer_backward_row};
    case CpuIsa::portable:
      break;
  }
#else
  static_cast<void>(cpu_isa());
#endif
  return {cpu_portable::species_outer_forward_row, cpu_portable::species_outer_backward_row};
}

}  // namespace

template <typename T>
void species_outer_forward_cpu(const SpeciesOuterArgs<T>& a, T* S) {
  if (!species_outer_supports(a.J)) return;
  const OuterRowKernels<T> k = outer_row_kernels<T>();
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 8)
#endif
  for (int64_t row = 0; row < a.nrows; ++row) k.forward(a, row, S);
}

template <typename T>
void species_outer_backward_cpu(const SpeciesOuterArgs<T>& a, const T* dS, T* dh, T* dY) {
  if (!species_outer_supports(a.J)) return;
  const OuterRowKernels<T> k = outer_row_kernels<T>();
#if defined(_OPENMP)
#pragma omp parallel
#endif
  {
    std::vector<T> slab(static_cast<std::size_t>(a.H) * a.J);  // a dS slab in k-major order
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, 8)
#endif
    for (int64_t row = 0; row < a.nrows; ++row) k.backward(a, row, dS, dh, dY, slab.data());
  }
}

template void species_outer_forward_cpu<float>(const SpeciesOuterArgs<float>&, float*);
template void species_outer_forward_cpu<double>(const SpeciesOuterArgs<double>&, double*);
template void species_outer_backward_cpu<float>(const SpeciesOuterArgs<float>&, const float*, float*, float*);
template void species_outer_backward_cpu<double>(const SpeciesOuterArgs<double>&, const double*, double*, double*);

}  // namespace flashmace
