// radial_mlp_kernels.h on CUDA: a block holds kRows rows; the activations (or gradients) of the tile
// live transposed in shared memory (tile[c][r]) and each layer is a [kRows x K] x [K x N] product
// with 4 x 8 outputs per thread, the layer's weights staged in shared memory beside the tile.
#include <cuda_runtime.h>

#include "engine/cuda_launch_check.h"
#include "engine/radial_mlp_kernels.h"

namespace flashmace {

namespace {

constexpr int kRows = 64;                  // rows per block
constexpr int kWidth = kRadialMlpMaxWidth;  // tile columns (widths are zero-padded to it)
constexpr int kThreads = 128;              // 16 row groups of 4 x 8 column groups of 8
static_assert(kRows == 64 && kWidth == 64 && kThreads == 128, "the thread tiling below assumes these");

template <typename T>
struct PrePointers {
  T* p[kRadialMlpMaxLayers];
};

template <typename T>
__device__ __forceinline__ T sigmoid(T x) {
  return T(1) / (T(1) + exp(-x));
}

// acc[i][j] = sum over k < K of tile[k][4 tr + i] * w[k][8 tc + j]
template <typename T>
__device__ __forceinline__ void tile_product(const T* __restrict__ tile, const T* __restrict__ w, int K, int tr,
                                             int tc, T (&acc)[4][8]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0;
  for (int k = 0; k < K; ++k) {
    T a[4], b[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = tile[k * kRows + 4 * tr + i];
#pragma unroll
    for (int j = 0; j < 8; ++j) b[j] = w[k * kWidth + 8 * tc + j];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) forward_kernel(RadialMlpArgs<T> a, const T* __restrict__ ef,
                                                           const int64_t* __restrict__ index, PrePointers<T> pre,
                                                           T* __restrict__ h) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* tile = reinterpret_cast<T*>(smem);
  T* w = tile + kWidth * kRows;
  const int tid = threadIdx.x, tr = tid / 8, tc = tid % 8;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int w0 = a.width[0];
  for (int i = tid; i < kWidth * kRows; i += kThreads) {
    const int k = i / kRows;
    const int64_t row = r0 + i % kRows;
    tile[i] = (k < w0 && row < a.rows) ? ef[(index ? index[row] : row) * w0 + k] : T(0);
  }
  for (int l = 0; l < a.layers; ++l) {
    const int K = a.width[l], N = a.width[l + 1];
    const T* __restrict__ wl = a.weight[l];
    for (int i = tid; i < kWidth * kWidth; i += kThreads) {
      const int k = i / kWidth, c = i % kWidth;
      w[i] = (k < K && c < N) ? wl[k * N + c] : T(0);
    }
    __syncthreads();
    T acc[4][8];
    tile_product(tile, w, K, tr, tc, acc);
    __syncthreads();  // every thread has read the tile and the weights
    const bool last = l + 1 == a.layers;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = r0 + 4 * tr + i;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int c = 8 * tc + j;
        const T x = acc[i][j];
        const T s = x * sigmoid(x);
        tile[c * kRows + 4 * tr + i] = s;  // zero beyond N (zero weights there)
        if (row < a.rows && c < N) {
          pre.p[l][row * N + c] = x;
          if (last) h[row * N + c] = s;
        }
      }
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) vjp_kernel(RadialMlpArgs<T> a, PrePointers<T> pre,
                                                       const T* __restrict__ grad, const int64_t* __restrict__ first,
                                                       const int64_t* __restrict__ second, T* __restrict__ d_ef) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* tile = reinterpret_cast<T*>(smem);
  T* w = tile + kWidth * kRows;
  const int tid = threadIdx.x, tr = tid / 8, tc = tid % 8;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int wl_out = a.width[a.layers];
  // dE/dh of the tile's rows (a pair's row: its first edge's gradient plus its second's, in that order)
  for (int i = tid; i < kWidth * kRows; i += kThreads) {
    const int c = i / kRows;
    const int64_t row = r0 + i % kRows;
    T g = 0;
    if (c < wl_out && row < a.rows) {
      if (first) {
        g = grad[first[row] * wl_out + c];
        const int64_t s = second[row];
        if (s >= 0) g = g + grad[s * wl_out + c];
      } else {
        g = grad[row * wl_out + c];
      }
    }
    tile[i] = g;
  }
  for (int l = a.layers - 1; l >= 0; --l) {
    const int K = a.width[l + 1], N = a.width[l];  // this layer maps N -> K; its transpose K -> N
    const T* __restrict__ wl = a.weight[l];
    const T* __restrict__ pl = pre.p[l];
    __syncthreads();
    for (int i = tid; i < kWidth * kRows; i += kThreads) {
      const int c = i / kRows;
      const int64_t row = r0 + i % kRows;
      if (c < K && row < a.rows) {
        const T x = pl[row * K + c];
        const T sg = sigmoid(x);
        tile[i] = tile[i] * (sg * (T(1) + x * (T(1) - sg)));  // silu'(x), as ATen's silu_backward
      }
    }
    for (int i = tid; i < kWidth * kWidth; i += kThreads) {
      const int k = i / kWidth, c = i % kWidth;  // w[k][c] = W_l[c][k]
      w[i] = (k < K && c < N) ? wl[c * K + k] : T(0);
    }
    __syncthreads();
    T acc[4][8];
    tile_product(tile, w, K, tr, tc, acc);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = r0 + 4 * tr + i;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int c = 8 * tc + j;
        if (l > 0) {
          tile[c * kRows + 4 * tr + i] = acc[i][j];
        } else if (row < a.rows && c < N) {
          d_ef[row * N + c] = acc[i][j];
        }
      }
    }
  }
}

template <typename T>
constexpr int shared_bytes() {
  return static_cast<int>(2 * kWidth * kRows * sizeof(T));
}

// Shared memory beyond the default 48 KB (float64) must be asked for once per kernel.
template <typename T, typename K>
void allow_shared(K kernel) {
  if (shared_bytes<T>() > 48 * 1024) {
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes<T>());
    if (err != cudaSuccess)
      throw Error(std::string("radial MLP: cannot reserve shared memory: ") + cudaGetErrorString(err));
  }
}

unsigned blocks_for(int64_t rows) { return static_cast<unsigned>((rows + kRows - 1) / kRows); }

template <typename T>
PrePointers<T> pointers(const RadialMlpArgs<T>& a, T* const* pre) {
  PrePointers<T> p{};
  for (int l = 0; l < a.layers; ++l) p.p[l] = pre[l];
  return p;
}

}  // namespace

template <typename T>
void radial_mlp_forward_cuda(const RadialMlpArgs<T>& a, const T* ef, const int64_t* index, T* const* pre, T* h,
                             void* stream) {
  if (a.rows == 0) return;
  static const bool ready = (allow_shared<T>(forward_kernel<T>), true);
  (void)ready;
  forward_kernel<T><<<blocks_for(a.rows), kThreads, shared_bytes<T>(), static_cast<cudaStream_t>(stream)>>>(
      a, ef, index, pointers(a, pre), h);
  check_cuda_launch("radial MLP", "forward");
}

template <typename T>
void radial_mlp_vjp_cuda(const RadialMlpArgs<T>& a, const T* const* pre, const T* grad, const int64_t* first,
                         const int64_t* second, T* d_ef, void* stream) {
  if (a.rows == 0) return;
  static const bool ready = (allow_shared<T>(vjp_kernel<T>), true);
  (void)ready;
  PrePointers<T> p{};
  for (int l = 0; l < a.layers; ++l) p.p[l] = const_cast<T*>(pre[l]);
  vjp_kernel<T><<<blocks_for(a.rows), kThreads, shared_bytes<T>(), static_cast<cudaStream_t>(stream)>>>(
      a, p, grad, first, second, d_ef);
  check_cuda_launch("radial MLP", "vjp");
}

template void radial_mlp_forward_cuda<float>(const RadialMlpArgs<float>&, const float*, const int64_t*, float* const*,
                                             float*, void*);
template void radial_mlp_forward_cuda<double>(const RadialMlpArgs<double>&, const double*, const int64_t*,
                                              double* const*, double*, void*);
template void radial_mlp_vjp_cuda<float>(const RadialMlpArgs<float>&, const float* const*, const float*,
                                         const int64_t*, const int64_t*, float*, void*);
template void radial_mlp_vjp_cuda<double>(const RadialMlpArgs<double>&, const double* const*, const double*,
                                          const int64_t*, const int64_t*, double*, void*);

}  // namespace flashmace
