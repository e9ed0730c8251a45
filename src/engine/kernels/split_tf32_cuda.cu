// split_tf32_kernels.h on CUDA: one thread per value, rounding by integer arithmetic on the bits
// (TF32 keeps float32's exponent and the top 10 of its 23 mantissa bits).
#include <cuda_runtime.h>

#include "engine/kernels/cuda_launch_check.h"
#include "engine/kernels/split_tf32_kernels.h"

namespace flashmace {

namespace {

constexpr int kThreads = 256;

// Round to nearest TF32 (ties away from zero); infinities and NaNs as they are.
__device__ __forceinline__ float tf32(float x) {
  if (!isfinite(x)) return x;
  return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xFFFFE000u);
}

__global__ void split_kernel(const float* x, int64_t n, float* hi, float* lo) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float h = tf32(x[i]);
  hi[i] = h;
  lo[i] = tf32(x[i] - h);
}

__global__ void silu_split_kernel(const float* pre, int64_t m, int64_t k, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * k) return;
  const int64_t row = i / k, col = i % k;
  const float x = pre[i];
  const float s = x / (1.f + expf(-x));
  const float h = tf32(s);
  float* o = out + row * 3 * k + col;
  o[0] = h;
  o[k] = h;
  o[2 * k] = tf32(s - h);
}

unsigned blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

void split_tf32_cuda(const float* x, int64_t n, float* hi, float* lo, void* stream) {
  if (n == 0) return;
  split_kernel<<<blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, n, hi, lo);
  check_cuda_launch("split TF32", "split_kernel");
}

void silu_split_tf32_cuda(const float* pre, int64_t m, int64_t k, float* out, void* stream) {
  if (m * k == 0) return;
  silu_split_kernel<<<blocks(m * k), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(pre, m, k, out);
  check_cuda_launch("split TF32", "silu_split_kernel");
}

}  // namespace flashmace
