// Conv TP message kernels on CUDA (mace_spec.md 5.2; the math and layouts: conv_tp_kernels.h).
// Parallel decomposition, each output owned by one thread, sums in a fixed order (no atomics):
//   forward:  thread per (receiver row, channel u): agg[row, block k, u, m3] for every path, summed
//             over the row's edges in order; per path each edge's x_u, Y and R are read once and all
//             2l3+1 outputs accumulated in registers (kMaxD3 of them);
//   dR, dY:   block per edge, thread per channel u (strided when mul > blockDim): dR[e, w_offset+u];
//             dY[e]: each thread's channels summed in registers over all paths, then reduced over
//             channels by warp shuffles and over warps in shared memory;
//   dx (+=):  thread per (x row, channel u), over the x row's edges in x_perm order.
#include <cuda_runtime.h>

#include <algorithm>

#include "engine/kernels/conv_tp_core.h"
#include "engine/kernels/cuda_launch_check.h"

namespace flashmace {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxD3 = 9;   // outputs per path held in registers: l3 <= 4
constexpr int kMaxSh = 25;  // dY components held per thread: spherical harmonics up to l = 4
constexpr int kMaxEdgeBlock = 256;

void check_launch(const char* kernel) { check_cuda_launch("conv TP", kernel); }

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__global__ void forward_kernel(ConvTPTables<T> t, ConvTPEdges<T> g, T* __restrict__ agg) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= g.nrows * t.max_mul) return;
  const int64_t row = idx / t.max_mul;
  const int u = static_cast<int>(idx % t.max_mul);
  const int64_t e0 = g.row_ptr[row], e1 = g.row_ptr[row + 1];
  T* out = agg + row * t.dim_mid;
  for (int i = 0; i < t.num_paths; ++i) {
    const ConvTPKernelPath p = t.paths[i];
    if (u >= p.mul) continue;
    if (p.d3 <= kMaxD3) {
      T acc[kMaxD3];
#pragma unroll
      for (int m = 0; m < kMaxD3; ++m) acc[m] = 0;
      for (int64_t e = e0; e < e1; ++e) {
        const T r = conv_tp_radial(t, g, e)[p.w_offset + u];
        const T* x_u = g.x + g.xindex[e] * t.dim_in1 + p.x_offset + u * p.d1;
        const T* y = g.Y + e * t.dim_sh + p.y_offset;
        for (int32_t q = p.run_begin[kConvTPByM3]; q < p.run_end[kConvTPByM3]; ++q) {
          const ConvTPKernelRun run = t.runs[q];
          acc[run.out] += r * conv_tp_contract(t, run, x_u, y);
        }
      }
      for (int m = 0; m < p.d3; ++m) out[p.mid_offset + u * p.d3 + m] = acc[m];
      continue;
    }
    for (int32_t q = p.run_begin[kConvTPByM3]; q < p.run_end[kConvTPByM3]; ++q) {
      const ConvTPKernelRun run = t.runs[q];
      T acc = 0;
      for (int64_t e = e0; e < e1; ++e) {
        const T* x_u = g.x + g.xindex[e] * t.dim_in1 + p.x_offset + u * p.d1;
        acc += conv_tp_radial(t, g, e)[p.w_offset + u] * conv_tp_contract(t, run, x_u, g.Y + e * t.dim_sh + p.y_offset);
      }
      out[p.mid_offset + u * p.d3 + run.out] = acc;
    }
  }
}

template <typename T>
__global__ void edge_grad_kernel(ConvTPTables<T> t, ConvTPEdges<T> g, ConvTPGradients<T> d) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* part = reinterpret_cast<T*>(smem);  // [warps][dim_sh]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int i = threadIdx.x; i < warps * t.dim_sh; i += blockDim.x) part[i] = 0;
  __syncthreads();
  const int64_t e = blockIdx.x;
  const T* x = g.x + g.xindex[e] * t.dim_in1;
  const T* y = g.Y + e * t.dim_sh;
  const T* r = conv_tp_radial(t, g, e);
  const T* grow = d.dagg + conv_tp_edge_row(g, e) * t.dim_mid;
  for (int i = 0; i < t.num_paths; ++i) {
    const ConvTPKernelPath p = t.paths[i];
    for (int u = threadIdx.x; u < p.mul; u += blockDim.x)
      d.dR[e * t.weight_numel + p.w_offset + u] =
          conv_tp_weight_grad(t, p, x + p.x_offset + u * p.d1, y + p.y_offset, grow + p.mid_offset + u * p.d3);
  }
  if (t.dim_sh <= kMaxSh) {
    // Each thread sums its channels' dY contributions over all paths in registers; one reduction
    // per component at the end (not one per path and component).
    T py[kMaxSh];
#pragma unroll
    for (int m = 0; m < kMaxSh; ++m) py[m] = 0;
    for (int i = 0; i < t.num_paths; ++i) {
      const ConvTPKernelPath p = t.paths[i];
      for (int u = threadIdx.x; u < p.mul; u += blockDim.x) {
        const T ru = r[p.w_offset + u];
        const T* xu = x + p.x_offset + u * p.d1;
        const T* gu = grow + p.mid_offset + u * p.d3;
        for (int32_t q = p.run_begin[kConvTPByM2]; q < p.run_end[kConvTPByM2]; ++q) {
          const ConvTPKernelRun run = t.runs[q];
          py[p.y_offset + run.out] += ru * conv_tp_contract(t, run, xu, gu);
        }
      }
    }
    for (int m = 0; m < t.dim_sh; ++m) {
      const T v = warp_sum(py[m]);
      if (lane == 0) part[warp * t.dim_sh + m] = v;
    }
  } else {
    // Loops uniform over the block, so every lane reaches each shuffle.
    for (int i = 0; i < t.num_paths; ++i) {
      const ConvTPKernelPath p = t.paths[i];
      for (int32_t q = p.run_begin[kConvTPByM2]; q < p.run_end[kConvTPByM2]; ++q) {
        const ConvTPKernelRun run = t.runs[q];
        T v = 0;
        for (int u = threadIdx.x; u < p.mul; u += blockDim.x)
          v += r[p.w_offset + u] * conv_tp_contract(t, run, x + p.x_offset + u * p.d1, grow + p.mid_offset + u * p.d3);
        v = warp_sum(v);
        if (lane == 0) part[warp * t.dim_sh + p.y_offset + run.out] += v;
      }
    }
  }
  __syncthreads();
  for (int m = threadIdx.x; m < t.dim_sh; m += blockDim.x) {
    T s = 0;
    for (int w = 0; w < warps; ++w) s += part[w * t.dim_sh + m];
    d.dY[e * t.dim_sh + m] = s;
  }
}

template <typename T>
__global__ void x_grad_kernel(ConvTPTables<T> t, ConvTPEdges<T> g, ConvTPGradients<T> d) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= d.num_x_rows * t.max_mul) return;
  const int64_t xr = idx / t.max_mul;
  const int u = static_cast<int>(idx % t.max_mul);
  T* dx = d.dx + conv_tp_x_row(d, xr) * t.dim_in1;
  for (int64_t j = d.x_ptr[xr]; j < d.x_ptr[xr + 1]; ++j) {
    const int64_t e = d.x_perm[j];
    const T* grow = d.dagg + conv_tp_edge_row(g, e) * t.dim_mid;
    for (int i = 0; i < t.num_paths; ++i) {
      const ConvTPKernelPath p = t.paths[i];
      if (u >= p.mul) continue;
      conv_tp_x_grad_add(t, p, conv_tp_radial(t, g, e)[p.w_offset + u], g.Y + e * t.dim_sh + p.y_offset,
                         grow + p.mid_offset + u * p.d3, dx + p.x_offset + u * p.d1);
    }
  }
}

int64_t blocks_for(int64_t threads) { return (threads + kThreads - 1) / kThreads; }

}  // namespace

template <typename T>
void conv_tp_forward_cuda(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, T* agg, void* stream) {
  const int64_t threads = g.nrows * t.max_mul;
  if (threads == 0) return;
  forward_kernel<T>
      <<<static_cast<unsigned>(blocks_for(threads)), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(t, g, agg);
  check_launch("conv_tp forward");
}

template <typename T>
void conv_tp_backward_cuda(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const ConvTPGradients<T>& d,
                           void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (g.num_edges > 0) {
    const int block = std::min(kMaxEdgeBlock, std::max(32, (t.max_mul + 31) / 32 * 32));
    const std::size_t shared = static_cast<std::size_t>(block / 32) * t.dim_sh * sizeof(T);
    edge_grad_kernel<T><<<static_cast<unsigned>(g.num_edges), block, shared, s>>>(t, g, d);
    check_launch("conv_tp edge gradients");
  }
  const int64_t threads = d.num_x_rows * t.max_mul;
  if (d.dx && g.num_edges > 0 && threads > 0) {
    x_grad_kernel<T><<<static_cast<unsigned>(blocks_for(threads)), kThreads, 0, s>>>(t, g, d);
    check_launch("conv_tp x gradient");
  }
}

template void conv_tp_forward_cuda<float>(const ConvTPTables<float>&, const ConvTPEdges<float>&, float*, void*);
template void conv_tp_forward_cuda<double>(const ConvTPTables<double>&, const ConvTPEdges<double>&, double*, void*);
template void conv_tp_backward_cuda<float>(const ConvTPTables<float>&, const ConvTPEdges<float>&,
                                           const ConvTPGradients<float>&, void*);
template void conv_tp_backward_cuda<double>(const ConvTPTables<double>&, const ConvTPEdges<double>&,
                                            const ConvTPGradients<double>&, void*);

}  // namespace flashmace
