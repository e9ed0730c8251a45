// skin_compaction_kernels.h on CUDA.
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "engine/kernels/cuda_launch_check.h"
#include "engine/kernels/skin_compaction_kernels.h"

namespace flashmace {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::max<int64_t>(1, (n + kThreads - 1) / kThreads)); }

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error(std::string("skin compaction: ") + what + ": " + cudaGetErrorString(err));
}

// The edge's vector (x_r - x_s) - shift, as list_vectors() computes it.
template <typename T>
__device__ void edge_vector(const SkinCompaction<T>& c, int64_t e, double v[3]) {
  const int64_t r = c.receiver[e], s = c.sender[e];
  for (int d = 0; d < 3; ++d) v[d] = (c.positions[3 * r + d] - c.positions[3 * s + d]) - c.shift[3 * e + d];
}

__device__ double squared(const double v[3]) { return v[0] * v[0] + v[1] * v[1] + v[2] * v[2]; }

// Padding edges before row r: floor(r D / N).
__device__ int64_t padding_before(int64_t r, int64_t D, int64_t N) { return N > 0 ? r * D / N : 0; }

// Padding edges before atom a in the sender order (the padding edges of row r are atom row0 + r's).
template <typename T>
__device__ int64_t padding_before_atom(const SkinCompaction<T>& c, int64_t a, int64_t D) {
  const int64_t r = a - c.row0;
  return padding_before(r < 0 ? 0 : (r < c.N ? r : c.N), D, c.N);
}

// The scans are one exclusive scan over the masks side by side: the sender and row scans start from
// the sums before them.
template <typename T>
__device__ int64_t sender_pos(const SkinCompaction<T>& c, int64_t i) {
  return c.sender_scan[i] - c.sender_scan[0];
}

template <typename T>
__device__ int64_t row_pos(const SkinCompaction<T>& c, int64_t u) {
  return c.row_scan[u] - c.row_scan[0];
}

template <typename T>
__device__ int64_t padding_total(const SkinCompaction<T>& c) {
  const int64_t count = c.edge_scan[c.F];
  return count < c.B ? c.B - count : 0;
}

// Stage 1: the masks (0/1 in the scan buffers), the closest length and the non-finite count.
template <typename T>
__global__ void mask_kernel(SkinCompaction<T> c) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < c.ntotal) {
    unsigned long long bad = 0;
    for (int d = 0; d < 3; ++d) bad += isfinite(c.positions[3 * e + d]) ? 0 : 1;
    if (bad) atomicAdd(&c.words[1], bad);
  }
  unsigned long long closest = 0;  // complemented bits: larger is closer
  if (e == c.F) {
    c.edge_scan[c.F] = 0;
    if (c.sender_scan) c.sender_scan[c.F] = 0;
    if (c.pair_index) c.row_scan[c.rows] = 0;
  } else if (e < c.F) {
    double v[3];
    edge_vector(c, e, v);
    const double len2 = squared(v);
    bool in = len2 < c.cutoff2;
    if (c.pair_index) {
      // A pair is decided by its first edge, so both edges agree (their lengths are equal anyway).
      const int64_t u = c.pair_index[e], first = c.pair_first[u];
      if (first != e) {
        double w[3];
        edge_vector(c, first, w);
        in = squared(w) < c.cutoff2;
      } else {
        c.row_scan[u] = in ? 1 : 0;
      }
    }
    c.edge_scan[e] = in ? 1 : 0;
    if (c.sender_scan) c.sender_scan[c.sender_rank[e]] = in ? 1 : 0;
    if (in) closest = ~static_cast<unsigned long long>(__double_as_longlong(len2));
  }
  // Non-negative doubles order as their bits: one atomic per warp for the largest complement.
  for (int o = 16; o > 0; o /= 2) closest = max(closest, __shfl_xor_sync(0xffffffffu, closest, o));
  if ((threadIdx.x & 31) == 0 && closest) atomicMax(&c.words[0], closest);
}

// Stage 3: each edge within the cutoff into its slot.
template <typename T>
__global__ void scatter_kernel(SkinCompaction<T> c) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= c.F || c.edge_scan[e + 1] == c.edge_scan[e]) return;
  const int64_t D = padding_total(c);
  const int64_t r = c.receiver[e], s = c.sender[e], row = r - c.row0;
  const int64_t pos = c.edge_scan[e] + padding_before(row, D, c.N);
  if (c.sender_scan) {
    const int64_t spos = sender_pos(c, c.sender_rank[e]) + padding_before_atom(c, s, D);
    if (spos < c.B)
      for (int k = 0; k < 2; ++k)
        if (c.sender_perm[k]) c.sender_perm[k][spos] = pos < c.B ? pos : c.B - 1;
  }
  if (c.pair_index) {
    const int64_t u = c.pair_index[e], prow = row_pos(c, u);
    if (c.pair_first[u] == e && prow < c.bucket_rows) {
      c.pair_first_out[prow] = pos < c.B ? pos : c.B - 1;
      const int64_t partner = c.pair_second[u];
      int64_t second = -1;
      if (partner >= 0) {
        const int64_t ppos = c.edge_scan[partner] + padding_before(c.receiver[partner] - c.row0, D, c.N);
        if (ppos < c.B) second = ppos;
      }
      c.pair_second_out[prow] = second;
    }
    if (pos < c.B) {
      c.pair_index_out[pos] = prow < c.bucket_rows ? prow : c.bucket_rows - 1;
      c.pair_share_out[pos] = c.pair_share[e];
    }
  }
  if (pos >= c.B) return;
  double v[3];
  edge_vector(c, e, v);
  for (int d = 0; d < 3; ++d) c.vectors[3 * pos + d] = v[d];
  c.out_sender[pos] = s;
  c.out_receiver[pos] = r;
  c.chunk_rows[pos] = row;
  if (c.z_sender) {
    c.z_sender[pos] = c.z_node[s];
    c.z_receiver[pos] = c.z_node[r];
  }
  c.sender_slot[pos] = c.slot_node[s];
}

// The compacted row pointer of receiver row a <= A (clamped into the bucket).
template <typename T>
__device__ int64_t receiver_row(const SkinCompaction<T>& c, int64_t a, int64_t D) {
  if (a > c.N) return c.B;
  const int64_t p = c.edge_scan[c.row_ptr[a]] + padding_before(a, D, c.N);
  return p < c.B ? p : c.B;
}

template <typename T>
__device__ int64_t sender_row(const SkinCompaction<T>& c, int64_t a, int64_t D) {
  const int64_t p = sender_pos(c, c.sender_row_ptr[a]) + padding_before_atom(c, a, D);
  return p < c.B ? p : c.B;
}

// Stage 4, per atom (and per pair row past the used ones).
template <typename T>
__global__ void rows_kernel(SkinCompaction<T> c) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t D = padding_total(c);
  const int64_t used = c.pair_index ? row_pos(c, c.rows) : 0;
  if (t <= c.A) {
    // (thread t: receiver row t of the list and sender atom t)
    const int64_t a = t, rp = receiver_row(c, a, D), rp_next = a < c.A ? receiver_row(c, a + 1, D) : c.B;
    if (a <= c.N) c.chunk_row_ptr[a] = rp;
    if (c.receiver_ptr) c.receiver_ptr[a] = rp;
    if (c.receiver_counts && a < c.A) c.receiver_counts[a] = rp_next - rp;
    if (c.sender_scan) {
      const int64_t sp = sender_row(c, a, D), sp_next = a < c.A ? sender_row(c, a + 1, D) : c.B;
      for (int k = 0; k < 2; ++k)
        if (c.sender_ptr_out[k]) c.sender_ptr_out[k][a] = sp;
      if (c.sender_counts && a < c.A) c.sender_counts[a] = sp_next - sp;
    }
    if (a < c.N) {
      // The padding edges at the end of row a: self-edges of its atom g far beyond the cutoff, one
      // shared pair row, last among atom g's edges in the sender order.
      const int64_t g = a + c.row0, end = rp_next;
      const int64_t sp_next = c.sender_scan ? sender_row(c, g + 1, D) : 0;
      int64_t begin = c.edge_scan[c.row_ptr[a + 1]] + padding_before(a, D, c.N);
      begin = begin < c.B ? begin : c.B;
      for (int64_t b = begin; b < end; ++b) {
        c.vectors[3 * b] = c.far;
        c.vectors[3 * b + 1] = 0;
        c.vectors[3 * b + 2] = 0;
        c.out_sender[b] = g;
        c.out_receiver[b] = g;
        c.chunk_rows[b] = a;
        if (c.z_sender) {
          c.z_sender[b] = c.z_node[g];
          c.z_receiver[b] = c.z_node[g];
        }
        c.sender_slot[b] = c.slot_node[g];
        if (c.pair_index) {
          c.pair_index_out[b] = used < c.bucket_rows ? used : c.bucket_rows - 1;
          c.pair_share_out[b] = T(1);
        }
        if (c.sender_scan) {
          const int64_t ppos = sp_next - end + b;
          if (ppos >= 0 && ppos < c.B)
            for (int k = 0; k < 2; ++k)
              if (c.sender_perm[k]) c.sender_perm[k][ppos] = b;
        }
      }
    }
  }
  if (c.pair_index && t >= used && t < c.bucket_rows) {
    // Rows past the used ones: the first reads the padding edges (the first of them), the rest edge 0.
    int64_t first = 0;
    if (t == used && D > 0) {
      const int64_t a = (c.N + D - 1) / D - 1;  // the first row with padding: floor((a + 1) D / N) >= 1
      first = c.edge_scan[c.row_ptr[a + 1]];
    }
    c.pair_first_out[t] = first;
    c.pair_second_out[t] = -1;
  }
  if (t == 0) {
    const int64_t count = c.edge_scan[c.F];
    double overflow = count > c.B ? 1 : 0;
    if (c.pair_index && used + 1 > c.bucket_rows) overflow += 1;
    const double closest = c.words[0] ? __longlong_as_double(static_cast<long long>(~c.words[0])) : 1e300;
    const double bad = static_cast<double>(c.words[1]);
    c.status[0] = c.status_adds ? c.status[0] + overflow : overflow;
    c.status[1] = c.status_adds ? fmin(c.status[1], closest) : closest;
    c.status[2] = c.status_adds ? fmax(c.status[2], bad) : bad;
    c.words[0] = c.words[1] = 0;  // (for the next compaction: the mask kernel's atomics start from zero)
  }
}

}  // namespace

std::size_t skin_compaction_scan_bytes(int64_t items) {
  std::size_t bytes = 0;
  check_cuda(cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<int64_t*>(nullptr), items), "scan size");
  return bytes;
}

template <typename T>
void skin_compaction_cuda(const SkinCompaction<T>& c, void* stream_ptr) {
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  mask_kernel<T><<<blocks_for(std::max(c.F + 1, c.ntotal)), kThreads, 0, stream>>>(c);
  check_cuda_launch("skin compaction", "mask");
  // One scan over the masks side by side (edge_scan, then sender_scan, then row_scan where present).
  const int64_t items = (c.F + 1) + (c.sender_scan ? c.F + 1 : 0) + (c.pair_index ? c.rows + 1 : 0);
  std::size_t have = c.scan_temp_bytes;
  check_cuda(cub::DeviceScan::ExclusiveSum(c.scan_temp, have, c.edge_scan, items, stream), "scan");
  scatter_kernel<T><<<blocks_for(c.F), kThreads, 0, stream>>>(c);
  check_cuda_launch("skin compaction", "scatter");
  rows_kernel<T><<<blocks_for(std::max(c.A + 1, c.bucket_rows)), kThreads, 0, stream>>>(c);
  check_cuda_launch("skin compaction", "rows");
}

template void skin_compaction_cuda<float>(const SkinCompaction<float>&, void*);
template void skin_compaction_cuda<double>(const SkinCompaction<double>&, void*);

}  // namespace flashmace
