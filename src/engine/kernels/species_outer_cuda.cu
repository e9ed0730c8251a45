// species_outer_kernels.h on CUDA: a block per row, a thread per hidden channel k (the backward with
// dS slabs of several slots: groups of such threads, see backward_threads), plus threads over (edge,
// four harmonics) for dY. The row's edges pass through shared memory in batches (slots, gathered h
// rows, Y rows), so the loads of a batch are in flight together, and each thread's inner loop reads
// broadcast shared memory into register accumulators:
//   forward: acc[j] += h[e, k] Y[e, j] in double (Y staged as double: no conversion in the loop),
//            flushed into S where the slot changes, edges in order (deterministic);
//   backward: dh[e, k] from the thread's dS[row, z, k, :] in registers, group q taking every groups-th
//            edge; dY[e, j..j+3] summed over k against the row's dS slabs, staged in shared memory
//            once per row.
// Rows whose dS slabs (Z H J) exceed the shared memory budget take the per-edge kernel (one thread
// per edge, dS read through L1).
#include <cuda_runtime.h>

#include "engine/kernels/cuda_launch_check.h"
#include "engine/kernels/species_outer_core.h"

namespace flashmace {

namespace {

constexpr int kBatch = 32;                   // edges per pass through shared memory
constexpr size_t kSlabBudget = 36 * 1024;    // bytes of dS slabs a backward block may stage
constexpr int kEdgeThreads = 128;            // the per-edge fallback

void check_launch(const char* kernel) { check_cuda_launch("first-layer sums", kernel); }

__host__ __device__ inline int lanes_for(int H) { return (H + 31) / 32 * 32; }
int padded4(int J) { return (J + 3) / 4 * 4; }

// Wide hidden layers need more than the default 48 KiB of dynamic shared memory: opt in.
template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

// Edges [e0, e0 + nb) of a row into shared memory: their slots and h rows first, then the h rows
// (a thread per column, unrolled so that a batch's loads are in flight together) and the Y rows.
// Starts and ends with a barrier.
template <typename T, typename YT>
__device__ void stage_edges(const SpeciesOuterArgs<T>& a, int64_t e0, int nb, int J, int64_t* zs, int64_t* hrow, T* hs,
                            int hs_stride, YT* ys) {
  __syncthreads();
  for (int i = threadIdx.x; i < nb; i += blockDim.x) {
    zs[i] = a.slot[e0 + i];
    hrow[i] = a.h_index ? a.h_index[e0 + i] : e0 + i;
  }
  __syncthreads();
#pragma unroll 8
  for (int i = threadIdx.x; i < nb * a.H; i += blockDim.x) {
    const int b = i / a.H, c = i % a.H;
    hs[b * hs_stride + c] = a.h[hrow[b] * a.H + c];
  }
#pragma unroll 4
  for (int i = threadIdx.x; i < nb * J; i += blockDim.x) ys[i] = static_cast<YT>(a.Y[e0 * J + i]);
  __syncthreads();
}

// Forward shared memory: Y [kBatch][J] double, h [kBatch][H] T, slots and h rows [kBatch].
template <typename T>
size_t forward_bytes(int H, int J) {
  return kBatch * (J * sizeof(double) + H * sizeof(T) + 2 * sizeof(int64_t));
}

template <typename T, int J>
__global__ void forward_kernel(SpeciesOuterArgs<T> a, T* __restrict__ S) {
  extern __shared__ double shared_d[];
  double* ys = shared_d;
  T* hs = reinterpret_cast<T*>(ys + kBatch * J);
  int64_t* zs = reinterpret_cast<int64_t*>(hs + kBatch * a.H);
  int64_t* hrow = zs + kBatch;
  const int64_t row = blockIdx.x, begin = a.row_ptr[row], end = a.row_ptr[row + 1];
  const int k = threadIdx.x;
  const bool active = k < a.H;
  double acc[J];
#pragma unroll
  for (int j = 0; j < J; ++j) acc[j] = 0;
  int64_t current = -1;
  for (int64_t e0 = begin; e0 < end; e0 += kBatch) {
    const int nb = static_cast<int>(end - e0 < kBatch ? end - e0 : kBatch);
    stage_edges(a, e0, nb, J, zs, hrow, hs, a.H, ys);
    if (!active) continue;
    for (int e = 0; e < nb; ++e) {
      if (zs[e] != current) {
        if (current >= 0) {
          T* s = S + (row * a.Z + current) * a.H + k;
#pragma unroll
          for (int j = 0; j < J; ++j) {
            s[j * a.stride_j] += static_cast<T>(acc[j]);
            acc[j] = 0;
          }
        }
        current = zs[e];
      }
      const double hk = static_cast<double>(hs[e * a.H + k]);
#pragma unroll
      for (int j = 0; j < J; ++j) acc[j] += hk * ys[e * J + j];
    }
  }
  if (active && current >= 0) {
    T* s = S + (row * a.Z + current) * a.H + k;
#pragma unroll
    for (int j = 0; j < J; ++j) s[j * a.stride_j] += static_cast<T>(acc[j]);
  }
}

// Backward shared memory: dS slabs [Z][H][J4] (J4 = J rounded up to 4, zero padded; each slot's slab
// followed by 4 unused values, so that the edges of a warp reading one (k, j) from different slots'
// slabs hit different banks, not one bank Z times), Y [kBatch][J], h [kBatch][H + 1] (padded: a warp
// reads one k across edges), slots and h rows [kBatch].
__host__ __device__ inline int slab_stride(int H, int J4) { return H * J4 + 4; }
template <typename T>
size_t slab_bytes(int Z, int H, int J) {
  return static_cast<size_t>(Z) * slab_stride(H, padded4(J)) * sizeof(T);
}
// The backward's threads: one group of lanes_for(H) threads, or, where the slabs are large enough to
// leave few blocks per SM (more than 12 kB: three slots of 64 channels in float32), up to four groups
// (256 threads), so that the staging loads and the edges' dh run on enough warps (8 slots: 0.78 -> 0.38
// ms per evaluation at 4,000 atoms on an H100).
template <typename T>
int backward_threads(int Z, int H, int J) {
  const int lanes = lanes_for(H), groups = 256 / lanes;
  if (slab_bytes<T>(Z, H, J) <= 12 * 1024 || groups <= 1) return lanes;
  return lanes * (groups > 4 ? 4 : groups);
}

template <typename T>
size_t backward_bytes(int Z, int H, int J) {
  return slab_bytes<T>(Z, H, J) + kBatch * ((J + H + 1) * sizeof(T) + 2 * sizeof(int64_t));
}

template <typename T, int J>
__global__ void backward_kernel(SpeciesOuterArgs<T> a, const T* __restrict__ dS, T* __restrict__ dh,
                                T* __restrict__ dY) {
  constexpr int J4 = (J + 3) / 4 * 4;
  extern __shared__ double shared_d[];
  const int zs_stride = slab_stride(a.H, J4);
  T* slabs = reinterpret_cast<T*>(shared_d);
  T* ys = slabs + a.Z * zs_stride;
  T* hs = ys + kBatch * J;
  // (the sizes before it are multiples of 8 bytes: J4 and kBatch are multiples of 4)
  int64_t* zs = reinterpret_cast<int64_t*>(hs + kBatch * (a.H + 1));
  int64_t* hrow = zs + kBatch;
  const int64_t row = blockIdx.x, begin = a.row_ptr[row], end = a.row_ptr[row + 1];
  if (begin == end) return;
  const int hs_stride = a.H + 1;
  // (read coalesced along z k, transposed into the slabs' [z][k][j] order)
  const int zh = a.Z * a.H;
#pragma unroll 4
  for (int i = threadIdx.x; i < zh * J4; i += blockDim.x) {
    const int zk = i % zh, j = i / zh;
    slabs[(zk / a.H) * zs_stride + (zk % a.H) * J4 + j] = j < J ? dS[j * a.stride_j + row * zh + zk] : T(0);
  }
  const int lanes = lanes_for(a.H), groups = blockDim.x / lanes;
  const int k = threadIdx.x % lanes, q = threadIdx.x / lanes;
  const bool active = k < a.H;
  T ds[J];
  int64_t current = -1;
  for (int64_t e0 = begin; e0 < end; e0 += kBatch) {
    const int nb = static_cast<int>(end - e0 < kBatch ? end - e0 : kBatch);
    stage_edges(a, e0, nb, J, zs, hrow, hs, hs_stride, ys);
    // dh[e, k] = sum_j dS[row, z(e), k, j] Y[e, j]: thread k, its dS row in registers.
    if (active) {
      for (int e = q; e < nb; e += groups) {
        if (zs[e] != current) {
          current = zs[e];
#pragma unroll
          for (int j = 0; j < J; ++j) ds[j] = slabs[current * zs_stride + k * J4 + j];
        }
        T s = 0;
#pragma unroll
        for (int j = 0; j < J; ++j) s += ds[j] * ys[e * J + j];
        dh[(e0 + e) * a.H + k] = s;
      }
    }
    // dY[e, j..j+3] = sum_k h[e, k] dS[row, z(e), k, j..j+3]: items (four harmonics, edge), the
    // edge fastest (the slab reads are one broadcast while the slot is the same).
    for (int i = threadIdx.x; i < kBatch * (J4 / 4); i += blockDim.x) {
      const int e = i % kBatch, g = 4 * (i / kBatch);
      if (e >= nb) continue;
      const T* slab = slabs + zs[e] * zs_stride + g;
      const T* he = hs + e * hs_stride;
      T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int kk = 0; kk < a.H; ++kk) {
        const T hk = he[kk];
        const T* d = slab + kk * J4;
        s0 += hk * d[0];
        s1 += hk * d[1];
        s2 += hk * d[2];
        s3 += hk * d[3];
      }
      T* out = dY + (e0 + e) * J + g;
      out[0] = s0;
      if (g + 1 < J) out[1] = s1;
      if (g + 2 < J) out[2] = s2;
      if (g + 3 < J) out[3] = s3;
    }
  }
}

// The per-edge fallback (thread per edge, dS through L1; needs edge_row).
template <typename T, int J>
__global__ void edge_backward_kernel(SpeciesOuterArgs<T> a, const T* __restrict__ dS, T* __restrict__ dh,
                                     T* __restrict__ dY) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < a.num_edges) species_outer_edge<T, J>(a, e, dS, dh, dY);
}

}  // namespace

template <typename T>
bool species_outer_cuda_stages_slabs(int Z, int H, int J) {
  return slab_bytes<T>(Z, H, J) <= kSlabBudget;
}

template <typename T>
void species_outer_forward_cuda(const SpeciesOuterArgs<T>& a, T* S, void* stream) {
  if (a.nrows == 0) return;
  const size_t bytes = forward_bytes<T>(a.H, a.J);
  with_harmonic_count(a.J, [&](auto J) {
    constexpr int j = decltype(J)::value;
    allow_shared(forward_kernel<T, j>, bytes);
    forward_kernel<T, j>
        <<<static_cast<unsigned>(a.nrows), lanes_for(a.H), bytes, static_cast<cudaStream_t>(stream)>>>(a, S);
  });
  check_launch("forward");
}

template <typename T>
void species_outer_backward_cuda(const SpeciesOuterArgs<T>& a, const T* dS, T* dh, T* dY, void* stream) {
  if (a.num_edges == 0) return;
  if (!species_outer_cuda_stages_slabs<T>(a.Z, a.H, a.J)) {
    with_harmonic_count(a.J, [&](auto J) {
      edge_backward_kernel<T, decltype(J)::value>
          <<<static_cast<unsigned>((a.num_edges + kEdgeThreads - 1) / kEdgeThreads), kEdgeThreads, 0,
             static_cast<cudaStream_t>(stream)>>>(a, dS, dh, dY);
    });
    check_launch("backward (per edge)");
    return;
  }
  const size_t bytes = backward_bytes<T>(a.Z, a.H, a.J);
  with_harmonic_count(a.J, [&](auto J) {
    constexpr int j = decltype(J)::value;
    allow_shared(backward_kernel<T, j>, bytes);
    backward_kernel<T, j><<<static_cast<unsigned>(a.nrows), backward_threads<T>(a.Z, a.H, a.J), bytes,
                            static_cast<cudaStream_t>(stream)>>>(a, dS, dh, dY);
  });
  check_launch("backward");
}

template bool species_outer_cuda_stages_slabs<float>(int, int, int);
template bool species_outer_cuda_stages_slabs<double>(int, int, int);
template void species_outer_forward_cuda<float>(const SpeciesOuterArgs<float>&, float*, void*);
template void species_outer_forward_cuda<double>(const SpeciesOuterArgs<double>&, double*, void*);
template void species_outer_backward_cuda<float>(const SpeciesOuterArgs<float>&, const float*, float*, float*, void*);
template void species_outer_backward_cuda<double>(const SpeciesOuterArgs<double>&, const double*, double*, double*,
                                                  void*);

}  // namespace flashmace
