// radial_mlp_kernels.h on CUDA: a thread per row, the row's activations (or gradients) in registers;
// per layer the block stages the weights (zero-padded to kWidth x kWidth) in shared memory and each
// thread multiplies its row by them, reading four weights at a time (every lane the same address: a
// broadcast). Rows enter and leave global memory through a per-warp transpose in shared memory, so
// loads and stores are whole 128-byte lines rather than one word of 32 rows.
#include <cuda_runtime.h>

#include "engine/cuda_launch_check.h"
#include "engine/radial_mlp_kernels.h"

namespace flashmace {

namespace {

constexpr int kWidth = kRadialMlpMaxWidth;
// Rows per block: three warps, so that three blocks (nine warps of ~210 registers a thread) share a
// multiprocessor and a 36,864-row step (864 atoms) runs in one wave on 132 of them.
constexpr int kThreads = 96;
constexpr int kWarps = kThreads / 32;
constexpr int kPitch = kWidth + 1;  // a transposed row in shared memory (+1: no bank conflicts)
constexpr int kSharedBytes = (kWidth * kWidth + kWarps * 32 * kPitch) * static_cast<int>(sizeof(float));
static_assert(kWidth == 64, "the loops below are unrolled for 64 columns");
static_assert(kSharedBytes <= 48 * 1024, "beyond the default shared memory a kernel may use");

struct PrePointers {
  float* p[kRadialMlpMaxLayers];
};

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// w[i][j] = W[i][j] for i < K, j < N (W row-major [K, N]), or its transpose w[j][i] = W[i][j] for
// j < N, i < K when `transpose`; zero elsewhere. Block-wide: called by every thread.
__device__ void stage_weights(float* __restrict__ w, const float* __restrict__ W, int K, int N, bool transpose) {
  __syncthreads();  // the previous layer's weights are no longer read
  for (int e = threadIdx.x; e < kWidth * kWidth; e += kThreads) {
    const int r = e / kWidth, c = e % kWidth;
    float v = 0.0f;
    if (!transpose && r < K && c < N) v = W[r * N + c];
    if (transpose && c < K && r < N) v = W[c * N + r];
    w[e] = v;
  }
  __syncthreads();
}

// out[j] = sum over i < K of in[i] * w[i][j], j < kWidth.
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
        const float4 b = wi[q];
        out[4 * q] += a * b.x;
        out[4 * q + 1] += a * b.y;
        out[4 * q + 2] += a * b.z;
        out[4 * q + 3] += a * b.w;
      }
    }
  }
}

// The warp's 32 rows [row0, row0 + 32): v[0..n) of each lane's row written to dst[row * n + c].
__device__ __forceinline__ void store_rows(const float (&v)[kWidth], float* __restrict__ buf, float* __restrict__ dst,
                                           int64_t row0, int64_t rows, int n) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < kWidth; ++j) buf[lane * kPitch + j] = v[j];
  __syncwarp();
  for (int r = 0; r < 32 && row0 + r < rows; ++r)
    for (int c = lane; c < n; c += 32) dst[(row0 + r) * n + c] = buf[r * kPitch + c];
  __syncwarp();
}

// The reverse: v[c] = row(r)[c] for c < n (zero beyond), row(r) a pointer to source row r's n values
// (null: zeros); rows of the two-row form add their second row.
template <typename RowOf>
__device__ __forceinline__ void load_rows(float (&v)[kWidth], float* __restrict__ buf, int64_t row0, int64_t rows,
                                          int n, const RowOf& row_of) {
  const int lane = threadIdx.x % 32;
  for (int r = 0; r < 32; ++r) {
    const bool live = row0 + r < rows;
    for (int c = lane; c < kWidth; c += 32) buf[r * kPitch + c] = (live && c < n) ? row_of(row0 + r, c) : 0.0f;
  }
  __syncwarp();
#pragma unroll
  for (int j = 0; j < kWidth; ++j) v[j] = buf[lane * kPitch + j];
  __syncwarp();
}

__global__ void __launch_bounds__(kThreads) forward_kernel(RadialMlpArgs a, const float* __restrict__ ef,
                                                           const int64_t* __restrict__ index, PrePointers pre,
                                                           float* __restrict__ h) {
  extern __shared__ __align__(16) float smem[];
  float* w = smem;
  float* buf = smem + kWidth * kWidth + (threadIdx.x / 32) * 32 * kPitch;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kThreads + (threadIdx.x / 32) * 32;
  const int n0 = a.width[0];
  float x[kWidth], y[kWidth];
  load_rows(x, buf, row0, a.rows, n0, [&](int64_t row, int c) { return ef[(index ? index[row] : row) * n0 + c]; });
  for (int l = 0; l < a.layers; ++l) {
    const int K = a.width[l], N = a.width[l + 1];
    stage_weights(w, a.weight[l], K, N, false);
    row_times(x, w, K, y);
    store_rows(y, buf, pre.p[l], row0, a.rows, N);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) x[j] = y[j] * sigmoid(y[j]);  // silu (zero beyond N)
  }
  store_rows(x, buf, h, row0, a.rows, a.width[a.layers]);
}

__global__ void __launch_bounds__(kThreads) vjp_kernel(RadialMlpArgs a, PrePointers pre, const float* __restrict__ grad,
                                                       const int64_t* __restrict__ first,
                                                       const int64_t* __restrict__ second, float* __restrict__ d_ef) {
  extern __shared__ __align__(16) float smem[];
  float* w = smem;
  float* buf = smem + kWidth * kWidth + (threadIdx.x / 32) * 32 * kPitch;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kThreads + (threadIdx.x / 32) * 32;
  const int nl = a.width[a.layers];
  float g[kWidth], y[kWidth];
  // dE/dh of the row (a pair's row: its first edge's gradient plus its second's, in that order)
  load_rows(g, buf, row0, a.rows, nl, [&](int64_t row, int c) {
    if (!first) return grad[row * nl + c];
    float v = grad[first[row] * nl + c];
    const int64_t s = second[row];
    if (s >= 0) v = v + grad[s * nl + c];
    return v;
  });
  for (int l = a.layers - 1; l >= 0; --l) {
    const int K = a.width[l + 1], N = a.width[l];  // the layer maps N -> K; its transpose K -> N
    const float* __restrict__ p = pre.p[l];
    load_rows(y, buf, row0, a.rows, K, [&](int64_t row, int c) { return p[row * K + c]; });
#pragma unroll
    for (int j = 0; j < kWidth; ++j) {
      const float s = sigmoid(y[j]);
      g[j] = g[j] * (s * (1.0f + y[j] * (1.0f - s)));  // silu'(x), as ATen's silu_backward
    }
    stage_weights(w, a.weight[l], N, K, true);
    row_times(g, w, K, y);
#pragma unroll
    for (int j = 0; j < kWidth; ++j) g[j] = y[j];
  }
  store_rows(g, buf, d_ef, row0, a.rows, a.width[0]);
}

unsigned blocks_for(int64_t rows) { return static_cast<unsigned>((rows + kThreads - 1) / kThreads); }

}  // namespace

void radial_mlp_forward_cuda(const RadialMlpArgs& a, const float* ef, const int64_t* index, float* const* pre, float* h,
                             void* stream) {
  if (a.rows == 0) return;
  PrePointers p{};
  for (int l = 0; l < a.layers; ++l) p.p[l] = pre[l];
  forward_kernel<<<blocks_for(a.rows), kThreads, kSharedBytes, static_cast<cudaStream_t>(stream)>>>(a, ef, index, p, h);
  check_cuda_launch("radial MLP", "forward");
}

void radial_mlp_vjp_cuda(const RadialMlpArgs& a, const float* const* pre, const float* grad, const int64_t* first,
                         const int64_t* second, float* d_ef, void* stream) {
  if (a.rows == 0) return;
  PrePointers p{};
  for (int l = 0; l < a.layers; ++l) p.p[l] = const_cast<float*>(pre[l]);
  vjp_kernel<<<blocks_for(a.rows), kThreads, kSharedBytes, static_cast<cudaStream_t>(stream)>>>(a, p, grad, first,
                                                                                                  second, d_ef);
  check_cuda_launch("radial MLP", "vjp");
}

}  // namespace flashmace
