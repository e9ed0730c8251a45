// first_layer_kernels.h on CUDA.
#include <cuda_runtime.h>

#include <type_traits>

#include "engine/kernels/cuda_launch_check.h"
#include "engine/kernels/first_layer_kernels.h"

namespace flashmace {

namespace {

constexpr int kChannels = 4;  // forward: channels per thread

// Rows per block: 2 in float, 1 in double (the same registers).
template <typename T>
constexpr int rows_per_block() {
  return sizeof(T) == 4 ? 2 : 1;
}

int warps_of(int threads) { return (threads + 31) / 32 * 32; }

// acc[m] for a runtime m < D (unrolled compares: the array stays in registers).
template <typename T, int D>
__device__ __forceinline__ T pick(const T (&acc)[D], int m) {
  T out = 0;
#pragma unroll
  for (int i = 0; i < D; ++i)
    if (i == m) out = acc[i];
  return out;
}

template <typename T, int D2, int R>
__device__ void aggregate_path(const FirstLayerArgs<T>& a, const FirstLayerPath& p, const T* __restrict__ S,
                               T* __restrict__ agg, T* slab, int64_t row0, int nr) {
  const int u0 = kChannels * threadIdx.x;
  T acc[kChannels][R][D2];
#pragma unroll
  for (int c = 0; c < kChannels; ++c)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < D2; ++m) acc[c][r][m] = 0;
  const int per_row = a.H * D2;
  for (int z = 0; z < a.Z; ++z) {
    __syncthreads();
#pragma unroll 4
    for (int i = threadIdx.x; i < R * per_row; i += blockDim.x) {
      const int r = i / per_row, k = (i % per_row) / D2, m = i % D2;
      slab[i] = r < nr ? S[(((row0 + r) * a.Z + z) * a.H + k) * a.J + p.y_offset + m] : T(0);
    }
    __syncthreads();
    T xv[kChannels];
#pragma unroll
    for (int c = 0; c < kChannels; ++c)
      xv[c] = u0 + c < p.mul ? a.x[z * a.x_stride + p.x_offset + u0 + c] : T(0);
    for (int k = 0; k < a.H; ++k) {
      const T* wk = a.w + static_cast<int64_t>(k) * a.w_stride + p.w_offset + u0;
      T w[kChannels];
#pragma unroll
      for (int c = 0; c < kChannels; ++c) w[c] = u0 + c < p.mul ? wk[c] * xv[c] : T(0);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < D2; ++m) {
          const T s = slab[(r * a.H + k) * D2 + m];
#pragma unroll
          for (int c = 0; c < kChannels; ++c) acc[c][r][m] += w[c] * s;
        }
    }
  }
#pragma unroll
  for (int c = 0; c < kChannels; ++c) {
    const int u = u0 + c;
    if (u >= p.mul) break;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      T* out = agg + (row0 + r) * a.dim_mid + p.mid_offset + u * p.d3;
      for (int m3 = 0; m3 < p.d3; ++m3) {
        T v = 0;
        for (int q = p.entry_begin; q < p.entry_end; ++q)
          if (a.entry_m[2 * q + 1] == m3) v += a.entry_c[q] * pick(acc[c][r], a.entry_m[2 * q]);
        out[m3] = v;
      }
    }
  }
}

template <typename T, int D2, int R>
__device__ void aggregate_backward_path(const FirstLayerArgs<T>& a, const FirstLayerPath& p,
                                        const T* __restrict__ dagg, T* __restrict__ dS, T* G, int64_t row0, int nr) {
  const int per_row = p.mul * D2;
#pragma unroll 4
  for (int i = threadIdx.x; i < R * per_row; i += blockDim.x) {
    const int r = i / per_row, u = (i % per_row) / D2, m2 = i % D2;
    T v = 0;
    if (r < nr) {
      const T* g = dagg + (row0 + r) * a.dim_mid + p.mid_offset + u * p.d3;
      for (int q = p.entry_begin; q < p.entry_end; ++q)
        if (a.entry_m[2 * q] == m2) v += a.entry_c[q] * g[a.entry_m[2 * q + 1]];
    }
    G[i] = v;
  }
  __syncthreads();
  const int k = threadIdx.x;
  if (k >= a.H) return;
  for (int z = 0; z < a.Z; ++z) {
    T acc[R][D2];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < D2; ++m) acc[r][m] = 0;
    const T* xz = a.x + z * a.x_stride + p.x_offset;
    for (int u = 0; u < p.mul; ++u) {
      const T w = a.wt[static_cast<int64_t>(p.w_offset + u) * a.H + k] * xz[u];
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int m = 0; m < D2; ++m) acc[r][m] += w * G[(r * p.mul + u) * D2 + m];
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r >= nr) break;
      T* out = dS + (((row0 + r) * a.Z + z) * a.H + k) * a.J + p.y_offset;
#pragma unroll
      for (int m = 0; m < D2; ++m) out[m] = acc[r][m];
    }
  }
}

// f(std::integral_constant<int, D>()) for a path's 2l + 1 (1, 3, 5, 7 or 9): the instantiation.
template <typename F>
__device__ __forceinline__ void with_path_dim(int d2, const F& f) {
  switch (d2) {
    case 1: f(std::integral_constant<int, 1>()); break;
    case 3: f(std::integral_constant<int, 3>()); break;
    case 5: f(std::integral_constant<int, 5>()); break;
    case 7: f(std::integral_constant<int, 7>()); break;
    default: f(std::integral_constant<int, 9>()); break;
  }
}

// grid: (row blocks, paths).
template <typename T, int R>
__global__ void aggregate_kernel(FirstLayerArgs<T> a, const T* __restrict__ S, T* __restrict__ agg) {
  extern __shared__ double shared_d[];
  const FirstLayerPath p = a.paths[blockIdx.y];
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
  const int nr = static_cast<int>(a.nrows - row0 < R ? a.nrows - row0 : R);
  with_path_dim(p.d2, [&](auto D2) {
    aggregate_path<T, decltype(D2)::value, R>(a, p, S, agg, reinterpret_cast<T*>(shared_d), row0, nr);
  });
}

template <typename T, int R>
__global__ void aggregate_backward_kernel(FirstLayerArgs<T> a, const T* __restrict__ dagg, T* __restrict__ dS) {
  extern __shared__ double shared_d[];
  const FirstLayerPath p = a.paths[blockIdx.y];
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
  const int nr = static_cast<int>(a.nrows - row0 < R ? a.nrows - row0 : R);
  with_path_dim(p.d2, [&](auto D2) {
    aggregate_backward_path<T, decltype(D2)::value, R>(a, p, dagg, dS, reinterpret_cast<T*>(shared_d), row0, nr);
  });
}

template <typename T>
dim3 grid_of(const FirstLayerArgs<T>& a) {
  constexpr int R = rows_per_block<T>();
  return dim3(static_cast<unsigned>((a.nrows + R - 1) / R), static_cast<unsigned>(a.num_paths));
}

// Shared memory of a block: its rows x width (forward H, backward the largest multiplicity) x 2l + 1.
size_t shared_bytes(int rows, int width, size_t element) {
  return static_cast<size_t>(rows) * width * kFirstLayerMaxDim * element;
}

}  // namespace

bool first_layer_cuda_supports(int H, int max_mul, bool float64) {
  constexpr size_t kShared = 48 * 1024;
  const int rows = float64 ? rows_per_block<double>() : rows_per_block<float>();
  const size_t element = float64 ? sizeof(double) : sizeof(float);
  return H <= 1024 && max_mul <= kChannels * 1024 && shared_bytes(rows, H, element) <= kShared &&
         shared_bytes(rows, max_mul, element) <= kShared;
}

template <typename T>
void first_layer_aggregate_cuda(const FirstLayerArgs<T>& a, const T* S, T* agg, void* stream) {
  if (a.nrows == 0 || a.num_paths == 0) return;
  constexpr int R = rows_per_block<T>();
  aggregate_kernel<T, R><<<grid_of(a), warps_of((a.max_mul + kChannels - 1) / kChannels),
                           shared_bytes(R, a.H, sizeof(T)), static_cast<cudaStream_t>(stream)>>>(a, S, agg);
  check_cuda_launch("first-layer aggregate", "forward");
}

template <typename T>
void first_layer_aggregate_backward_cuda(const FirstLayerArgs<T>& a, const T* dagg, T* dS, void* stream) {
  if (a.nrows == 0 || a.num_paths == 0) return;
  constexpr int R = rows_per_block<T>();
  aggregate_backward_kernel<T, R><<<grid_of(a), warps_of(a.H), shared_bytes(R, a.max_mul, sizeof(T)),
                                    static_cast<cudaStream_t>(stream)>>>(a, dagg, dS);
  check_cuda_launch("first-layer aggregate", "backward");
}

template void first_layer_aggregate_cuda<float>(const FirstLayerArgs<float>&, const float*, float*, void*);
template void first_layer_aggregate_cuda<double>(const FirstLayerArgs<double>&, const double*, double*, void*);
template void first_layer_aggregate_backward_cuda<float>(const FirstLayerArgs<float>&, const float*, float*, void*);
template void first_layer_aggregate_backward_cuda<double>(const FirstLayerArgs<double>&, const double*, double*,
                                                          void*);

}  // namespace flashmace
