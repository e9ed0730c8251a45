// species_outer_kernels.h on CUDA: thread per (row, k) forward, thread per edge backward.
#include <cuda_runtime.h>

#include "engine/cuda_launch_check.h"
#include "engine/species_outer_core.h"

namespace flashmace {

namespace {

constexpr int kThreads = 128;

void check_launch(const char* kernel) { check_cuda_launch("first-layer sums", kernel); }

template <typename T, int J>
__global__ void forward_kernel(SpeciesOuterArgs<T> a, T* __restrict__ S) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx < a.nrows * a.H) species_outer_row<T, J>(a, idx / a.H, static_cast<int>(idx % a.H), S);
}

template <typename T, int J>
__global__ void backward_kernel(SpeciesOuterArgs<T> a, const T* __restrict__ dS, T* __restrict__ dh,
                                T* __restrict__ dY) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < a.num_edges) species_outer_edge<T, J>(a, e, dS, dh, dY);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

template <typename T>
void species_outer_forward_cuda(const SpeciesOuterArgs<T>& a, T* S, void* stream) {
  if (a.nrows * a.H == 0) return;
  with_harmonic_count(a.J, [&](auto J) {
    forward_kernel<T, decltype(J)::value>
        <<<blocks_for(a.nrows * a.H), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a, S);
  });
  check_launch("forward");
}

template <typename T>
void species_outer_backward_cuda(const SpeciesOuterArgs<T>& a, const T* dS, T* dh, T* dY, void* stream) {
  if (a.num_edges == 0) return;
  with_harmonic_count(a.J, [&](auto J) {
    backward_kernel<T, decltype(J)::value>
        <<<blocks_for(a.num_edges), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a, dS, dh, dY);
  });
  check_launch("backward");
}

template void species_outer_forward_cuda<float>(const SpeciesOuterArgs<float>&, float*, void*);
template void species_outer_forward_cuda<double>(const SpeciesOuterArgs<double>&, double*, void*);
template void species_outer_backward_cuda<float>(const SpeciesOuterArgs<float>&, const float*, float*, float*, void*);
template void species_outer_backward_cuda<double>(const SpeciesOuterArgs<double>&, const double*, double*, double*,
                                                  void*);

}  // namespace flashmace
