// radial_mlp_kernels.h on CUDA: a thread per row, the row (64 values) and a layer's outputs (64) in
// registers; weights read through the read-only cache as 16-byte vectors at warp-uniform addresses.
#include <cuda_runtime.h>

#include "engine/cuda_launch_check.h"
#include "engine/radial_mlp_kernels.h"

namespace flashmace {

namespace {

constexpr int kWidth = kRadialMlpMaxWidth;
static_assert(kWidth == 64, "the loops below are unrolled for 64 columns");
// Three warps a block: at ~210 registers a thread, three blocks (nine warps) share a multiprocessor,
// so a 36,864-row step (864 atoms) runs in one wave on 132 of them.
constexpr int kThreads = 96;

struct PrePointers {
  float* p[kRadialMlpMaxLayers];
};

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// out[j] = sum over i < K of in[i] * w[i][j] (w: one padded layer of the table).
__device__ __forceinline__ void row_times(const float (&in)[kWidth], const float* __restrict__ w, int K,
                                          float (&out)[kWidth]) {
#pragma unroll
  for (int j = 0; j < kWidth; ++j) out[j] = 0.0f;
#pragma unroll
  for (int i = 0; i < kWidth; ++i) {
    if (i < K) {
      const float a = in[i];
      const float4* wi = reinterpret_cast<const float4*>(w + i * kWidth);
#pragma unroll
      for (int q = 0; q < kWidth / 4; ++q) {
        const float4 b = __ldg(wi + q);
        out[4 * q] += a * b.x;
        out[4 * q + 1] += a * b.y;
        out[4 * q + 2] += a * b.z;
        out[4 * q + 3] += a * b.w;
      }
    }
  }
}

// v[c] = src[c] for c < n, zero beyond (all loads issued before any is used).
__device__ __forceinline__ void load_row(const float* __restrict__ src, int n, float (&v)[kWidth]) {
  if (n == kWidth && (reinterpret_cast<uintptr_t>(src) & 15) == 0) {
#pragma unroll
    for (int q = 0; q < kWidth / 4; ++q) {
      const float4 b = __ldg(reinterpret_cast<const float4*>(src) + q);
      v[4 * q] = b.x;
      v[4 * q + 1] = b.y;
      v[4 * q + 2] = b.z;
      v[4 * q + 3] = b.w;
    }
    return;
  }
#pragma unroll
  for (int c = 0; c < kWidth; ++c) v[c] = c < n ? __ldg(src + c) : 0.0f;
}

// dst[0 .. 64): all 64 values (dst 16-byte aligned: a row of a [rows, 64] table).
__device__ __forceinline__ void store_row64(const float (&v)[kWidth], float* __restrict__ dst) {
#pragma unroll
  for (int q = 0; q < kWidth / 4; ++q)
    reinterpret_cast<float4*>(dst)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
}

__global__ void __launch_bounds__(kThreads) forward_kernel(RadialMlpArgs a, const float* __restrict__ ef,
                                                           const int64_t* __restrict__ index, PrePointers pre,
                                                           float* __restrict__ h) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (row >= a.rows) return;
  float x[kWidth], y[kWidth];
  load_row(ef + (index ? index[row] : row) * a.ef_stride, a.width[0], x);
  for (int l = 0; l < a.layers; ++l) {
    row_times(x, a.table + l * kWidth * kWidth, a.width[l], y);
    store_row64(y, pre.p[l] + row * kWidth);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) x[j] = y[j] * sigmoid(y[j]);  // silu (zero beyond the width)
  }
  store_row64(x, h + row * kWidth);
}

__global__ void __launch_bounds__(kThreads) vjp_kernel(RadialMlpArgs a, PrePointers pre, const float* __restrict__ grad,
                                                       const int64_t* __restrict__ first,
                                                       const int64_t* __restrict__ second, float* __restrict__ d_ef) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (row >= a.rows) return;
  const int nl = a.width[a.layers];
  float g[kWidth], y[kWidth];
  // dE/dh of the row (a pair's row: its first edge's gradient plus its second's, in that order)
  load_row(grad + (first ? first[row] : row) * a.grad_stride, nl, g);
  if (first && second[row] >= 0) {
    load_row(grad + second[row] * a.grad_stride, nl, y);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) g[j] = g[j] + y[j];
  }
  for (int l = a.layers - 1; l >= 0; --l) {
    load_row(pre.p[l] + row * kWidth, a.width[l + 1], y);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) {
      const float s = sigmoid(y[j]);
      g[j] = g[j] * (s * (1.0f + y[j] * (1.0f - s)));  // silu'(x), as ATen's silu_backward
    }
    // d(input)[i] = sum over j of g[j] W[i][j]: the transposed layer, stored after the forward ones
    row_times(g, a.table + (a.layers + l) * kWidth * kWidth, a.width[l + 1], y);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) g[j] = y[j];
  }
  float* out = d_ef + row * a.width[0];
#pragma unroll
  for (int c = 0; c < kWidth; ++c)
    if (c < a.width[0]) out[c] = g[c];
}

unsigned blocks_for(int64_t rows) { return static_cast<unsigned>((rows + kThreads - 1) / kThreads); }

}  // namespace

void radial_mlp_forward_cuda(const RadialMlpArgs& a, const float* ef, const int64_t* index, float* const* pre, float* h,
                             void* stream) {
  if (a.rows == 0) return;
  PrePointers p{};
  for (int l = 0; l < a.layers; ++l) p.p[l] = pre[l];
  forward_kernel<<<blocks_for(a.rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a, ef, index, p, h);
  check_cuda_launch("radial MLP", "forward");
}

void radial_mlp_vjp_cuda(const RadialMlpArgs& a, const float* const* pre, const float* grad, const int64_t* first,
                         const int64_t* second, float* d_ef, void* stream) {
  if (a.rows == 0) return;
  PrePointers p{};
  for (int l = 0; l < a.layers; ++l) p.p[l] = const_cast<float*>(pre[l]);
  vjp_kernel<<<blocks_for(a.rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a, p, grad, first, second, d_ef);
  check_cuda_launch("radial MLP", "vjp");
}

}  // namespace flashmace
