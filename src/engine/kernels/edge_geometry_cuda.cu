// Fused per-edge geometry on CUDA (edge_geometry_kernels.h): one thread per edge running
// edge_geometry_core.h.
#include <cuda_runtime.h>

#include "engine/kernels/cuda_launch_check.h"
#include "engine/kernels/edge_geometry_core.h"

namespace flashmace {

namespace {

constexpr int kThreads = 128;

void check_launch(const char* kernel) { check_cuda_launch("edge geometry", kernel); }

template <typename T>
__global__ void forward_kernel(GeometryTables<T> t, const T* __restrict__ v, GeometryElements z, int64_t E,
                               T* __restrict__ Y, T* __restrict__ ef) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < E)
    geometry_forward_edge(t, v + 3 * e, z.sender ? z.sender[e] : 0, z.receiver ? z.receiver[e] : 0,
                          Y + e * t.dim_sh, ef + e * t.n_basis);
}

template <typename T>
__global__ void backward_kernel(GeometryTables<T> t, const T* __restrict__ v, GeometryElements z, int64_t E,
                                const T* __restrict__ dY, const T* __restrict__ def, T* __restrict__ dv) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < E)
    geometry_backward_edge(t, v + 3 * e, z.sender ? z.sender[e] : 0, z.receiver ? z.receiver[e] : 0,
                           dY ? dY + e * t.dim_sh : nullptr, def ? def + e * t.n_basis : nullptr, dv + 3 * e);
}

template <typename T>
__global__ void zbl_kernel(ZblTables<T> t, const T* __restrict__ v, GeometryElements z, int64_t E,
                           T* __restrict__ energy, T* __restrict__ slope) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < E) geometry_zbl_edge(t, v + 3 * e, z.sender[e], z.receiver[e], energy + e, slope + e);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

template <typename T>
void edge_geometry_forward_cuda(const GeometryTables<T>& t, const T* v, GeometryElements z, int64_t E, T* Y, T* ef,
                                void* stream) {
  if (E == 0) return;
  forward_kernel<T><<<blocks_for(E), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(t, v, z, E, Y, ef);
  check_launch("geometry forward");
}

template <typename T>
void edge_geometry_backward_cuda(const GeometryTables<T>& t, const T* v, GeometryElements z, int64_t E, const T* dY,
                                 const T* def, T* dv, void* stream) {
  if (E == 0) return;
  backward_kernel<T><<<blocks_for(E), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(t, v, z, E, dY, def, dv);
  check_launch("geometry backward");
}

template <typename T>
void edge_zbl_cuda(const ZblTables<T>& t, const T* v, GeometryElements z, int64_t E, T* energy, T* slope,
                   void* stream) {
  if (E == 0) return;
  zbl_kernel<T><<<blocks_for(E), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(t, v, z, E, energy, slope);
  check_launch("ZBL");
}

template void edge_zbl_cuda<float>(const ZblTables<float>&, const float*, GeometryElements, int64_t, float*, float*,
                                   void*);
template void edge_zbl_cuda<double>(const ZblTables<double>&, const double*, GeometryElements, int64_t, double*,
                                    double*, void*);
template void edge_geometry_forward_cuda<float>(const GeometryTables<float>&, const float*, GeometryElements, int64_t,
                                                float*, float*, void*);
template void edge_geometry_forward_cuda<double>(const GeometryTables<double>&, const double*, GeometryElements,
                                                 int64_t, double*, double*, void*);
template void edge_geometry_backward_cuda<float>(const GeometryTables<float>&, const float*, GeometryElements,
                                                 int64_t, const float*, const float*, float*, void*);
template void edge_geometry_backward_cuda<double>(const GeometryTables<double>&, const double*, GeometryElements,
                                                  int64_t, const double*, const double*, double*, void*);

}  // namespace flashmace
