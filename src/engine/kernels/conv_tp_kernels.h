#pragma once
// Fused message kernels of the conv tensor product (mace_spec.md 5.2), CPU and CUDA, float and double.
//   forward:  agg[row] = sum_{e in row} TP(x[xindex[e]], Y[e], R[e])          (no [E, dim(mid)] tensor)
//   backward: dR[e], dY[e] from dagg[row(e)]; dx[xindex[e]] += ... (optional)
// R[e] stands for R[radial_index[e]] when a radial index is given; dR stays per edge (the CPU and
// specialised CUDA kernels can also sum it per radial row: ConvTPGradients::dR_by_radial_row).
// Edges are sorted by receiver: the edges of output row r are row_ptr[r] .. row_ptr[r+1]-1, with
// row_ptr[0] = 0 and row_ptr[nrows] = num_edges (indices relative to the first edge of the range).
// Every output element is summed by one thread in a fixed order: results are deterministic.
// Torch-free and CUDA-free (plain pointers, a stream handle), row-major contiguous arrays.
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/kernels/conv_tp_descriptor.h"

namespace flashmace {

// The three contraction orders of a path's Wigner-3j terms c * a[ia] * b[ib], grouped in runs by
// the output component they contribute to.
enum ConvTPOrder : int {
  kConvTPByM3 = 0,  // out m3, a = x_u[m1], b = Y[m2]         (forward, dR)
  kConvTPByM2 = 1,  // out m2, a = x_u[m1], b = dagg_u[m3]    (dY)
  kConvTPByM1 = 2,  // out m1, a = Y[m2],   b = dagg_u[m3]    (dx)
};

struct ConvTPKernelPath {
  int32_t x_offset, y_offset, mid_offset, w_offset;
  int32_t mul, d1, d2, d3;
  int32_t run_begin[3], run_end[3];  // per ConvTPOrder, into the run table
};
struct ConvTPKernelRun {
  int32_t out, term_begin, term_end;
};
struct ConvTPKernelTerm {
  int32_t a, b;
};

// The descriptor packed for the kernels (host memory); coefficients carry alpha.
struct ConvTPPacked {
  int dim_in1 = 0, dim_sh = 0, dim_mid = 0, weight_numel = 0, max_mul = 0;
  std::vector<ConvTPKernelPath> paths;
  std::vector<ConvTPKernelRun> runs;
  std::vector<ConvTPKernelTerm> terms;
  std::vector<double> coeff;  // one per term
};
ConvTPPacked pack_conv_tp(const ConvTPDescriptor& d);

// Pointers to the packed tables in the memory of the device that runs the kernel.
template <typename T>
struct ConvTPTables {
  const ConvTPKernelPath* paths = nullptr;
  const ConvTPKernelRun* runs = nullptr;
  const ConvTPKernelTerm* terms = nullptr;
  const T* coeff = nullptr;
  int num_paths = 0;
  int dim_in1 = 0, dim_sh = 0, dim_mid = 0, weight_numel = 0, max_mul = 0;
};

template <typename T>
struct ConvTPEdges {
  const T* x = nullptr;                // [num_x, dim_in1]: node features, or per-species table (layer 0)
  int64_t num_x = 0;
  const int64_t* xindex = nullptr;     // [num_edges]: row of x for each edge (sender node or species)
  const T* Y = nullptr;                // [num_edges, dim_sh]
  const T* R = nullptr;                // [num_radial, weight_numel]
  int64_t num_radial = 0;
  const int64_t* radial_index = nullptr;  // [num_edges]: row of R for each edge (null: row e; edges
                                          // with bitwise-equal radial inputs can share one row)
  const int64_t* row_ptr = nullptr;    // [nrows + 1]: receiver CSR
  const int64_t* edge_row = nullptr;   // [num_edges]: each edge's row (optional; else found in row_ptr)
  int64_t nrows = 0;
  int64_t num_edges = 0;
};

template <typename T>
struct ConvTPGradients {
  const T* dagg = nullptr;            // [nrows, dim_mid]
  T* dR = nullptr;                    // [num_edges, weight_numel], written (per edge, also with a radial index)
  // CPU and specialised CUDA kernels only: dR is [num_radial, weight_numel] and each row the sum of its
  // edges' gradients. The CPU kernels write it (a row without edges: zeros; the others summed in edge
  // order); the specialised CUDA kernels add into the caller's zeros (atomically: with at most two
  // edges per row, as for reverse-edge pairs, 0 + a + b = 0 + b + a exactly, so the result is
  // deterministic).
  bool dR_by_radial_row = false;
  T* dY = nullptr;                    // [num_edges, dim_sh], written
  T* dx = nullptr;                    // [num_x, dim_in1], accumulated (+=); null: skipped
  const int64_t* x_perm = nullptr;    // [num_edges]: edges sorted by xindex (needed with dx)
  const int64_t* x_ptr = nullptr;     // [num_x_rows + 1]: CSR of x_perm by xindex
  // The x row of each CSR row, for a CSR over the x rows the edges use (an edge chunk's senders);
  // null: CSR row r is x row r. dx rows outside it are left as they are.
  const int64_t* x_rows = nullptr;
  int64_t num_x_rows = 0;
  // CPU kernels with dR_by_radial_row: n values of scratch, where the dR of edges that share their radial
  // row with another thread's edges waits (null: the kernel allocates it).
  std::function<T*(int64_t n)> waiting_rows;
};

// agg [nrows, dim_mid] is written.
template <typename T>
void conv_tp_forward_cpu(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, T* agg);
template <typename T>
void conv_tp_backward_cpu(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const ConvTPGradients<T>& d);

// CUDA versions (built with FLASHMACE_CUDA_KERNELS): every pointer in device memory, work enqueued on
// `stream` (a cudaStream_t), no synchronisation. Throw flashmace::Error on a failed launch.
template <typename T>
void conv_tp_forward_cuda(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, T* agg, void* stream);
template <typename T>
void conv_tp_backward_cuda(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const ConvTPGradients<T>& d,
                           void* stream);

}  // namespace flashmace
