// Fused per-edge geometry on CUDA (edge_geometry_kernels.h): the same formulas as edge_terms.cpp's
// ATen code, one thread per edge, every intermediate in registers or thread-local arrays.
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"
#include "engine/edge_geometry_kernels.h"

namespace flashmace {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxSh = (kGeometryMaxLmax + 1) * (kGeometryMaxLmax + 1);

void check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(std::string("edge geometry: CUDA kernel ") + kernel + " failed to launch: " + cudaGetErrorString(err));
}

// Length, unit vector (length clamped at 1e-12 as in edge_terms.cpp) and harmonics of one edge.
template <typename T>
__device__ __forceinline__ T harmonics(const GeometryTables<T>& t, const T* v, T u[3], T* y) {
  const T r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  const T rc = r > T(1e-12) ? r : T(1e-12);
  for (int j = 0; j < 3; ++j) u[j] = v[j] / rc;
  y[0] = 1;
  if (t.lmax >= 1)
    for (int j = 0; j < 3; ++j) y[1 + j] = T(1.7320508075688772) * u[j];
  for (int k = 4; k < t.dim_sh; ++k) y[k] = 0;
  for (int i = 0; i < t.num_terms; ++i) {
    const GeometryShTerm s = t.terms[i];
    y[s.b] += t.coeff[i] * y[s.a] * u[s.j];
  }
  return r;
}

// Polynomial envelope and its r-derivative (zero beyond r_max).
template <typename T>
__device__ __forceinline__ void envelope(const GeometryTables<T>& t, T r, T* value, T* slope) {
  const T rm = static_cast<T>(t.r_max), p = static_cast<T>(t.p);
  const T c1 = (p + 1) * (p + 2) / 2, c2 = p * (p + 2), c3 = p * (p + 1) / 2;
  const T x = r / rm;
  T xp1 = 1;
  for (int k = 0; k < t.p - 1; ++k) xp1 *= x;
  const T xp = xp1 * x;
  const bool inside = r < rm;
  *value = inside ? T(1) - c1 * xp + c2 * xp * x - c3 * xp * x * x : T(0);
  *slope = inside ? (-c1 * p * xp1 + c2 * (p + 1) * xp - c3 * (p + 2) * xp * x) / rm : T(0);
}

template <typename T>
__global__ void forward_kernel(GeometryTables<T> t, const T* __restrict__ v, int64_t E, T* __restrict__ Y,
                               T* __restrict__ ef) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= E) return;
  T u[3], y[kMaxSh];
  const T r = harmonics(t, v + 3 * e, u, y);
  for (int k = 0; k < t.dim_sh; ++k) Y[e * t.dim_sh + k] = y[k];
  T env, denv;
  envelope(t, r, &env, &denv);
  const T pre = static_cast<T>(t.prefactor);
  for (int k = 0; k < t.n_basis; ++k) ef[e * t.n_basis + k] = pre * sin(t.bessel[k] * r) / r * env;
}

template <typename T>
__global__ void backward_kernel(GeometryTables<T> t, const T* __restrict__ v, int64_t E, const T* __restrict__ dY,
                                const T* __restrict__ def, T* __restrict__ dv) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= E) return;
  T u[3], y[kMaxSh];
  const T r = harmonics(t, v + 3 * e, u, y);
  T gu[3] = {0, 0, 0};
  if (dY) {
    T gy[kMaxSh];
    for (int k = 0; k < t.dim_sh; ++k) gy[k] = dY[e * t.dim_sh + k];
    // Y_l = C_l(Y_{l-1}, u) from the top down: the terms in reverse.
    for (int i = t.num_terms - 1; i >= 0; --i) {
      const GeometryShTerm s = t.terms[i];
      const T c = t.coeff[i] * gy[s.b];
      gy[s.a] += c * u[s.j];
      gu[s.j] += c * y[s.a];
    }
    if (t.lmax >= 1)
      for (int j = 0; j < 3; ++j) gu[j] += T(1.7320508075688772) * gy[1 + j];
  }
  const T rc = r > T(1e-12) ? r : T(1e-12);
  const T ug = u[0] * gu[0] + u[1] * gu[1] + u[2] * gu[2];
  T gr = 0;  // dE/dr through the radial features
  if (def) {
    T env, denv;
    envelope(t, r, &env, &denv);
    const T pre = static_cast<T>(t.prefactor);
    for (int k = 0; k < t.n_basis; ++k) {
      const T wx = t.bessel[k] * r, s = sin(wx);
      const T basis = pre * s / r, dbasis = pre * (wx * cos(wx) - s) / (r * r);
      gr += def[e * t.n_basis + k] * (dbasis * env + basis * denv);
    }
  }
  for (int j = 0; j < 3; ++j) dv[3 * e + j] = (gu[j] - u[j] * ug) / rc + gr * u[j];
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

template <typename T>
void edge_geometry_forward_cuda(const GeometryTables<T>& t, const T* v, int64_t E, T* Y, T* ef, void* stream) {
  if (E == 0) return;
  forward_kernel<T><<<blocks_for(E), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(t, v, E, Y, ef);
  check_launch("geometry forward");
}

template <typename T>
void edge_geometry_backward_cuda(const GeometryTables<T>& t, const T* v, int64_t E, const T* dY, const T* def, T* dv,
                                 void* stream) {
  if (E == 0) return;
  backward_kernel<T><<<blocks_for(E), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(t, v, E, dY, def, dv);
  check_launch("geometry backward");
}

template void edge_geometry_forward_cuda<float>(const GeometryTables<float>&, const float*, int64_t, float*, float*,
                                                void*);
template void edge_geometry_forward_cuda<double>(const GeometryTables<double>&, const double*, int64_t, double*,
                                                 double*, void*);
template void edge_geometry_backward_cuda<float>(const GeometryTables<float>&, const float*, int64_t, const float*,
                                                 const float*, float*, void*);
template void edge_geometry_backward_cuda<double>(const GeometryTables<double>&, const double*, int64_t,
                                                  const double*, const double*, double*, void*);

}  // namespace flashmace
