// atom_sums_kernels.h on CUDA.
#include <cuda_runtime.h>

#include "engine/kernels/atom_sums_kernels.h"
#include "engine/kernels/cuda_launch_check.h"

namespace flashmace {

namespace {

constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ double warp_sum(double x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_down_sync(0xffffffffu, x, offset);
  return x;  // lane 0 holds the sum
}

template <typename T>
__global__ void atom_sums_kernel(AtomSumsArgs<T> a, double* __restrict__ forces, double* __restrict__ virial) {
  const int lane = threadIdx.x % 32;
  const int64_t atom = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (atom >= a.atoms) return;  // whole warps leave together
  double out[3] = {0, 0, 0}, w[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t e = a.receiver_ptr[atom] + lane; e < a.receiver_ptr[atom + 1]; e += 32) {
    double g[3], v[3];
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      g[c] = static_cast<double>(a.grad[3 * e + c]);
      v[c] = a.vectors[3 * e + c];
      out[c] -= g[c];
    }
    if (virial) {
#pragma unroll
      for (int r = 0; r < 3; ++r)
#pragma unroll
        for (int c = 0; c < 3; ++c) w[3 * r + c] -= 0.5 * (v[r] * g[c] + g[r] * v[c]);
    }
  }
  if (forces) {
    double s[3] = {0, 0, 0};
    for (int64_t k = a.sender_ptr[atom] + lane; k < a.sender_ptr[atom + 1]; k += 32) {
      const int64_t e = a.sender_order[k];
#pragma unroll
      for (int c = 0; c < 3; ++c) s[c] += static_cast<double>(a.grad[3 * e + c]);
    }
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      const double sum = warp_sum(s[c]) + warp_sum(out[c]);  // senders' sum minus receivers'
      if (lane == 0) forces[3 * atom + c] = sum;
    }
  }
  if (virial) {
#pragma unroll
    for (int k = 0; k < 9; ++k) {
      const double sum = warp_sum(w[k]);
      if (lane == 0) virial[9 * atom + k] = sum;
    }
  }
}

}  // namespace

template <typename T>
void atom_sums_cuda(const AtomSumsArgs<T>& a, double* forces, double* virial_parts, void* stream) {
  if (a.atoms == 0 || (!forces && !virial_parts)) return;
  const unsigned blocks = static_cast<unsigned>((a.atoms + kWarpsPerBlock - 1) / kWarpsPerBlock);
  atom_sums_kernel<T><<<blocks, 32 * kWarpsPerBlock, 0, static_cast<cudaStream_t>(stream)>>>(a, forces, virial_parts);
  check_cuda_launch("atom sums", "forces and virial");
}

template void atom_sums_cuda<float>(const AtomSumsArgs<float>&, double*, double*, void*);
template void atom_sums_cuda<double>(const AtomSumsArgs<double>&, double*, double*, void*);

}  // namespace flashmace
