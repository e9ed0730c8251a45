// pair_rows_kernels.h on CUDA: a thread per output element.
#include <cuda_runtime.h>

#include "engine/kernels/cuda_launch_check.h"
#include "engine/kernels/pair_rows_kernels.h"

namespace flashmace {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void pair_rows_sum_kernel(const T* __restrict__ x, const int64_t* __restrict__ first,
                                     const int64_t* __restrict__ second, int64_t rows, int64_t width,
                                     T* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * width) return;
  const int64_t u = i / width, c = i % width, s = second[u];
  T v = x[first[u] * width + c];
  if (s >= 0) v = v + x[s * width + c];
  out[i] = v;
}

}  // namespace

template <typename T>
void pair_rows_sum_cuda(const T* x, const int64_t* first, const int64_t* second, int64_t rows, int64_t width, T* out,
                        void* stream) {
  const int64_t n = rows * width;
  if (n == 0) return;
  pair_rows_sum_kernel<T><<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
                            static_cast<cudaStream_t>(stream)>>>(x, first, second, rows, width, out);
  check_cuda_launch("pair row sums", "pair_rows_sum");
}

template void pair_rows_sum_cuda<float>(const float*, const int64_t*, const int64_t*, int64_t, int64_t, float*, void*);
template void pair_rows_sum_cuda<double>(const double*, const int64_t*, const int64_t*, int64_t, int64_t, double*,
                                         void*);

}  // namespace flashmace
