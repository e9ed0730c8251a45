// species_outer_kernels.h on the CPU (OpenMP over rows / edges when built with it).
#include "engine/kernels/species_outer_core.h"

namespace flashmace {

template <typename T>
void species_outer_forward_cpu(const SpeciesOuterArgs<T>& a, T* S) {
  with_harmonic_count(a.J, [&](auto J) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
    for (int64_t row = 0; row < a.nrows; ++row)
      for (int k = 0; k < a.H; ++k) species_outer_row<T, decltype(J)::value>(a, row, k, S);
  });
}

template <typename T>
void species_outer_backward_cpu(const SpeciesOuterArgs<T>& a, const T* dS, T* dh, T* dY) {
  with_harmonic_count(a.J, [&](auto J) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
    for (int64_t e = 0; e < a.num_edges; ++e) species_outer_edge<T, decltype(J)::value>(a, e, dS, dh, dY);
  });
}

template void species_outer_forward_cpu<float>(const SpeciesOuterArgs<float>&, float*);
template void species_outer_forward_cpu<double>(const SpeciesOuterArgs<double>&, double*);
template void species_outer_backward_cpu<float>(const SpeciesOuterArgs<float>&, const float*, float*, float*);
template void species_outer_backward_cpu<double>(const SpeciesOuterArgs<double>&, const double*, double*, double*);

}  // namespace flashmace
