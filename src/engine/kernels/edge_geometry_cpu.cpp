// Fused per-edge geometry on the CPU (edge_geometry_kernels.h): edge_geometry_core.h over the
// edges (OpenMP when built with it).
#include "engine/kernels/edge_geometry_core.h"

namespace flashmace {

template <typename T>
void edge_geometry_forward_cpu(const GeometryTables<T>& t, const T* v, GeometryElements z, int64_t E, T* Y, T* ef) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (int64_t e = 0; e < E; ++e)
    geometry_forward_edge(t, v + 3 * e, z.sender ? z.sender[e] : 0, z.receiver ? z.receiver[e] : 0,
                          Y + e * t.dim_sh, ef + e * t.n_basis);
}

template <typename T>
void edge_geometry_backward_cpu(const GeometryTables<T>& t, const T* v, GeometryElements z, int64_t E, const T* dY,
                                const T* def, T* dv) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (int64_t e = 0; e < E; ++e)
    geometry_backward_edge(t, v + 3 * e, z.sender ? z.sender[e] : 0, z.receiver ? z.receiver[e] : 0,
                           dY ? dY + e * t.dim_sh : nullptr, def ? def + e * t.n_basis : nullptr, dv + 3 * e);
}

template <typename T>
void edge_zbl_cpu(const ZblTables<T>& t, const T* v, GeometryElements z, int64_t E, T* energy, T* slope) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
  for (int64_t e = 0; e < E; ++e) geometry_zbl_edge(t, v + 3 * e, z.sender[e], z.receiver[e], energy + e, slope + e);
}

template void edge_zbl_cpu<float>(const ZblTables<float>&, const float*, GeometryElements, int64_t, float*, float*);
template void edge_zbl_cpu<double>(const ZblTables<double>&, const double*, GeometryElements, int64_t, double*,
                                   double*);
template void edge_geometry_forward_cpu<float>(const GeometryTables<float>&, const float*, GeometryElements, int64_t,
                                               float*, float*);
template void edge_geometry_forward_cpu<double>(const GeometryTables<double>&, const double*, GeometryElements,
                                                int64_t, double*, double*);
template void edge_geometry_backward_cpu<float>(const GeometryTables<float>&, const float*, GeometryElements, int64_t,
                                                const float*, const float*, float*);
template void edge_geometry_backward_cpu<double>(const GeometryTables<double>&, const double*, GeometryElements,
                                                 int64_t, const double*, const double*, double*);

}  // namespace flashmace
