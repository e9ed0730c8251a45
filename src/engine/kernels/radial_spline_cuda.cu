// radial_spline_kernels.h on CUDA. The sort: each row's interval and t with a histogram (atomics),
// one block's exclusive scan over the N + 1 counts, a scatter (atomics: rows of one interval land
// in any order, which no result depends on). Forward and backward: a warp per kRowsPerWarp sorted
// rows, its lanes over the K functions; a lane keeps a function's four coefficients (one vector
// load from the [N][K][4] table) while consecutive rows share their interval.
#include <cuda_runtime.h>

#include "engine/kernels/cuda_launch_check.h"
#include "engine/kernels/radial_spline_core.h"
#include "engine/kernels/radial_spline_kernels.h"

namespace flashmace {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kRowsPerWarp = 8;
constexpr int kScanThreads = 1024;

template <typename T>
struct Coefficients {
  T c0, c1, c2, c3;
};

__device__ __forceinline__ Coefficients<float> load_coefficients(const float* p) {
  const float4 v = __ldg(reinterpret_cast<const float4*>(p));
  return {v.x, v.y, v.z, v.w};
}
__device__ __forceinline__ Coefficients<double> load_coefficients(const double* p) {
  const double2 a = __ldg(reinterpret_cast<const double2*>(p));
  const double2 b = __ldg(reinterpret_cast<const double2*>(p) + 1);
  return {a.x, a.y, b.x, b.y};
}

template <typename T>
__global__ void spline_intervals_kernel(RadialSplineArgs<T> a, RadialSplineRows<T> s) {
  const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= a.rows) return;
  T t;
  const int32_t i = spline_row_interval(a, u, &t);
  s.interval[u] = i;
  s.t[u] = t;
  atomicAdd(&s.count[i], 1);
}

// In place, one block: count[0 .. n) becomes its exclusive prefix sum.
__global__ void spline_scan_kernel(int32_t* count, int n) {
  __shared__ int32_t partial[kScanThreads];
  const int per = (n + kScanThreads - 1) / kScanThreads;
  const int begin = threadIdx.x * per, end = min(n, begin + per);
  int32_t sum = 0;
  for (int i = begin; i < end; ++i) sum += count[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int offset = 1; offset < kScanThreads; offset *= 2) {
    const int32_t add = threadIdx.x >= offset ? partial[threadIdx.x - offset] : 0;
    __syncthreads();
    partial[threadIdx.x] += add;
    __syncthreads();
  }
  int32_t running = threadIdx.x > 0 ? partial[threadIdx.x - 1] : 0;
  for (int i = begin; i < end; ++i) {
    const int32_t c = count[i];
    count[i] = running;
    running += c;
  }
}

template <typename T>
__global__ void spline_scatter_kernel(RadialSplineArgs<T> a, RadialSplineRows<T> s) {
  const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= a.rows) return;
  s.order[atomicAdd(&s.count[s.interval[u]], 1)] = u;
}

// The sorted rows [p0, p0 + n) of this warp: their row numbers, intervals and t, the same in
// every lane.
template <typename T>
struct WarpRows {
  int64_t row[kRowsPerWarp];
  int32_t interval[kRowsPerWarp];
  T t[kRowsPerWarp];
  int n = 0;
};

template <typename T>
__device__ __forceinline__ WarpRows<T> warp_rows(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s) {
  WarpRows<T> w;
  const int64_t p0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.y) * kRowsPerWarp;
  w.n = static_cast<int>(min(static_cast<int64_t>(kRowsPerWarp), a.rows - p0));
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j)
    if (j < w.n) {
      w.row[j] = s.order[p0 + j];
      w.interval[j] = s.interval[w.row[j]];
      w.t[j] = s.t[w.row[j]];
    }
  return w;
}

template <typename T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    radial_spline_forward_kernel(RadialSplineArgs<T> a, RadialSplineRows<T> s, T* __restrict__ out) {
  const WarpRows<T> w = warp_rows(a, s);
  if (w.n <= 0) return;
  const int64_t K = a.width;
  for (int64_t k = threadIdx.x; k < K; k += 32) {
    int32_t held = -1;
    Coefficients<T> q{};
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
      if (j >= w.n) break;
      T value = 0;
      if (w.interval[j] < a.intervals) {
        if (w.interval[j] != held) {
          held = w.interval[j];
          q = load_coefficients(a.table + (static_cast<int64_t>(held) * K + k) * 4);
        }
        const T t = w.t[j];
        value = q.c0 + t * (q.c1 + t * (q.c2 + t * q.c3));
      }
      out[w.row[j] * K + k] = value;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    radial_spline_backward_kernel(RadialSplineArgs<T> a, RadialSplineRows<T> s, const T* __restrict__ grad,
                                  T* __restrict__ dr) {
  const WarpRows<T> w = warp_rows(a, s);
  if (w.n <= 0) return;
  const int64_t K = a.width;
  T sum[kRowsPerWarp];
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) sum[j] = 0;
  for (int64_t k = threadIdx.x; k < K; k += 32) {
    int32_t held = -1;
    Coefficients<T> q{};
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
      if (j >= w.n || w.interval[j] >= a.intervals) continue;
      if (w.interval[j] != held) {
        held = w.interval[j];
        q = load_coefficients(a.table + (static_cast<int64_t>(held) * K + k) * 4);
      }
      const T t = w.t[j];
      sum[j] += grad[w.row[j] * K + k] * (q.c1 + 2 * t * q.c2 + 3 * t * t * q.c3);
    }
  }
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    T v = sum[j];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (threadIdx.x == 0 && j < w.n) dr[w.row[j]] = v / a.spacing;
  }
}

template <typename T>
__global__ void radial_spline_edge_gradient_kernel(const T* __restrict__ vectors, const int64_t* __restrict__ index,
                                                   const T* __restrict__ share, const T* __restrict__ dr,
                                                   int64_t edges, T* __restrict__ gv) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= edges) return;
  const T* v = vectors + 3 * e;
  const T r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  if (!(r > 0)) return;
  const T f = dr[index ? index[e] : e] * (share ? share[e] : T(1)) / r;
  for (int c = 0; c < 3; ++c) gv[3 * e + c] += f * v[c];
}

constexpr int kThreads = 256;
unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }
unsigned row_blocks(int64_t rows) {
  const int64_t per_block = static_cast<int64_t>(kWarpsPerBlock) * kRowsPerWarp;
  return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

}  // namespace

template <typename T>
void radial_spline_sort_cuda(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s, void* stream_ptr) {
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  const int n = static_cast<int>(a.intervals) + 2;
  cudaMemsetAsync(s.count, 0, sizeof(int32_t) * n, stream);
  if (a.rows == 0) return;
  spline_intervals_kernel<T><<<blocks_for(a.rows), kThreads, 0, stream>>>(a, s);
  check_cuda_launch("radial spline", "spline_intervals");
  spline_scan_kernel<<<1, kScanThreads, 0, stream>>>(s.count, n);
  check_cuda_launch("radial spline", "spline_scan");
  spline_scatter_kernel<T><<<blocks_for(a.rows), kThreads, 0, stream>>>(a, s);
  check_cuda_launch("radial spline", "spline_scatter");
}

template <typename T>
void radial_spline_forward_cuda(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s, T* out, void* stream) {
  if (a.rows == 0) return;
  radial_spline_forward_kernel<T><<<row_blocks(a.rows), dim3(32, kWarpsPerBlock), 0,
                                    static_cast<cudaStream_t>(stream)>>>(a, s, out);
  check_cuda_launch("radial spline", "radial_spline_forward");
}

template <typename T>
void radial_spline_backward_cuda(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s, const T* grad, T* dr,
                                 void* stream) {
  if (a.rows == 0) return;
  radial_spline_backward_kernel<T><<<row_blocks(a.rows), dim3(32, kWarpsPerBlock), 0,
                                     static_cast<cudaStream_t>(stream)>>>(a, s, grad, dr);
  check_cuda_launch("radial spline", "radial_spline_backward");
}

template <typename T>
void radial_spline_edge_gradient_cuda(const T* vectors, const int64_t* index, const T* share, const T* dr,
                                      int64_t edges, T* gv, void* stream) {
  if (edges == 0) return;
  radial_spline_edge_gradient_kernel<T><<<blocks_for(edges), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      vectors, index, share, dr, edges, gv);
  check_cuda_launch("radial spline", "radial_spline_edge_gradient");
}

#define FLASHMACE_SPLINE_CUDA(T)                                                                                  \
  template void radial_spline_sort_cuda<T>(const RadialSplineArgs<T>&, const RadialSplineRows<T>&, void*);        \
  template void radial_spline_forward_cuda<T>(const RadialSplineArgs<T>&, const RadialSplineRows<T>&, T*, void*); \
  template void radial_spline_backward_cuda<T>(const RadialSplineArgs<T>&, const RadialSplineRows<T>&, const T*,  \
                                               T*, void*);                                                        \
  template void radial_spline_edge_gradient_cuda<T>(const T*, const int64_t*, const T*, const T*, int64_t, T*, void*);
FLASHMACE_SPLINE_CUDA(float)
FLASHMACE_SPLINE_CUDA(double)
#undef FLASHMACE_SPLINE_CUDA

}  // namespace flashmace
