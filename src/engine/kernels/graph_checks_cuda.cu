// graph_checks_kernels.h on CUDA: grid-stride loops; a mismatch stores 0 into the flag (every
// writer stores the same value, so the order of the stores does not matter).
#include <cuda_runtime.h>

#include <algorithm>

#include "engine/kernels/cuda_launch_check.h"
#include "engine/kernels/graph_checks_kernels.h"

namespace flashmace {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>((n + kThreads - 1) / kThreads, 1), 1024));
}

__global__ void equal_kernel(EqualityRanges r, int* flag) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bool same = true;
  for (int k = 0; k < r.count; ++k)
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < r.n[k]; i += stride)
      same = same && r.a[k][i] == r.b[k][i];
  if (!same) *flag = 0;
}

__global__ void negated_kernel(const double* __restrict__ v, const int64_t* __restrict__ pa,
                               const int64_t* __restrict__ pb, int64_t n, int* flag) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bool same = true;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    if (pb[k] < 0) continue;  // (an edge without a partner)
    const double* x = v + 3 * pa[k];
    const double* y = v + 3 * pb[k];
    same = same && x[0] == -y[0] && x[1] == -y[1] && x[2] == -y[2];
  }
  if (!same) *flag = 0;
}

}  // namespace

void check_equal_cuda(const EqualityRanges& ranges, int* flag, void* stream) {
  int64_t longest = 0;
  for (int k = 0; k < ranges.count; ++k) longest = std::max(longest, ranges.n[k]);
  if (longest == 0) return;
  equal_kernel<<<blocks_for(longest), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(ranges, flag);
  check_cuda_launch("graph checks", "equal");
}

void check_negated_cuda(const double* v, const int64_t* pa, const int64_t* pb, int64_t n, int* flag, void* stream) {
  if (n == 0) return;
  negated_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(v, pa, pb, n, flag);
  check_cuda_launch("graph checks", "negated");
}

}  // namespace flashmace
