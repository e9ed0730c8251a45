// Conv TP message kernels on the CPU (mace_spec.md 5.2; the math and layouts: conv_tp_kernels.h).
// e3nn stores a block of `mul` copies of an irrep as [u][m]; the node features x and the output
// gradients dagg are transposed here once per call to [m][u], so that the row kernels
// (conv_tp_cpu_rows.h, one build per instruction set, chosen by cpu_isa()) run every inner loop over
// the channel u with unit stride in vector registers; their outputs are transposed back.
// Parallel decomposition (OpenMP when built with it, else serial), each output owned by one thread:
//   forward:      one thread per receiver row: agg[row] summed over the row's edges in order;
//   dR, dY:       one thread per edge (dR[e], dY[e] written), or, with dR summed per radial row, one
//                 thread per radial row for its edges (dY[e] written; dR[row] written by the first,
//                 the others added, in edge order);
//   dx (+=):      one thread per x row of the CSR, over its edges in x_perm order.
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/kernels/conv_tp_cpu_rows.h"
#include "core/cpu_isa.h"

namespace flashmace {

namespace {

template <typename F>
void parallel_rows(int64_t n, const F& body) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 8)
#endif
  for (int64_t r = 0; r < n; ++r) body(r);
}

// body(i, scratch) for i in [0, n), with `scratch_size` values of scratch per thread.
template <typename T, typename F>
void parallel_with_scratch(int64_t n, std::size_t scratch_size, int64_t grain, const F& body) {
#if defined(_OPENMP)
#pragma omp parallel
#endif
  {
    std::vector<T> scratch(scratch_size);
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, grain)
#endif
    for (int64_t i = 0; i < n; ++i) body(i, scratch.data());
  }
  static_cast<void>(grain);
}

template <typename T>
struct RowKernels {
  void (*forward)(const ConvTPTables<T>&, const ConvTPCouplings<T>&, const ConvTPEdges<T>&, const T*, int64_t, T*,
                  T*);
  void (*backward)(const ConvTPTables<T>&, const ConvTPCouplings<T>&, const ConvTPEdges<T>&,
                   const ConvTPGradients<T>&, const T*, const T*, int64_t, T*, bool, T*);
  void (*x_grad)(const ConvTPTables<T>&, const ConvTPCouplings<T>&, const ConvTPEdges<T>&, const ConvTPGradients<T>&,
                 const T*, int64_t, T*, T*);
};

template <typename T>
RowKernels<T> row_kernels() {
  // (cpu_isa() names only instruction sets built into this binary)
#if FLASHMACE_CPU_X86_VARIANTS
  switch (cpu_isa()) {
    case CpuIsa::avx512:
      return {cpu_avx512::conv_tp_forward_row, cpu_avx512::conv_tp_backward_edge, cpu_avx512::conv_tp_x_grad_row};
    case CpuIsa::avx2:
      return {cpu_avx2::conv_tp_forward_row, cpu_avx2::conv_tp_backward_edge, cpu_avx2::conv_tp_x_grad_row};
    case CpuIsa::portable:
      break;
  }
#else
  static_cast<void>(cpu_isa());
#endif
  return {cpu_portable::conv_tp_forward_row, cpu_portable::conv_tp_backward_edge, cpu_portable::conv_tp_x_grad_row};
}

// One irreps block of an [n, dim] array: `mul` copies of a (2l+1)-dimensional irrep at `offset`.
struct Block {
  int32_t offset, mul, d;
};

// The distinct input (x) or output (mid) blocks that the paths read or write.
template <typename T>
std::vector<Block> path_blocks(const ConvTPTables<T>& t, bool input) {
  std::vector<Block> blocks;
  for (int i = 0; i < t.num_paths; ++i) {
    const ConvTPKernelPath& p = t.paths[i];
    const Block b = input ? Block{p.x_offset, p.mul, p.d1} : Block{p.mid_offset, p.mul, p.d3};
    if (std::none_of(blocks.begin(), blocks.end(), [&](const Block& o) { return o.offset == b.offset; }))
      blocks.push_back(b);
  }
  return blocks;
}

// [u][m] -> [m][u] within each block of one row.
template <typename T>
void to_mu(const std::vector<Block>& blocks, const T* in, T* out) {
  for (const Block& b : blocks)
    for (int u = 0; u < b.mul; ++u)
      for (int m = 0; m < b.d; ++m) out[b.offset + m * b.mul + u] = in[b.offset + u * b.d + m];
}

// [m][u] -> [u][m] within each block of one row, added to `out`.
template <typename T>
void add_from_mu(const std::vector<Block>& blocks, const T* in, T* out) {
  for (const Block& b : blocks)
    for (int u = 0; u < b.mul; ++u)
      for (int m = 0; m < b.d; ++m) out[b.offset + u * b.d + m] += in[b.offset + m * b.mul + u];
}

template <typename T>
std::vector<T> transposed_rows(const std::vector<Block>& blocks, const T* in, int64_t n, int dim) {
  std::vector<T> out(static_cast<std::size_t>(n) * dim);
  parallel_rows(n, [&](int64_t r) { to_mu(blocks, in + r * dim, out.data() + r * dim); });
  return out;
}

// The row kernels keep a path's dY partials and a tile's inputs in registers, for irreps up to l = 7.
template <typename T>
void check_harmonic_sizes(const ConvTPTables<T>& t) {
  for (int i = 0; i < t.num_paths; ++i) {
    const ConvTPKernelPath& p = t.paths[i];
    if (std::max({p.d1, p.d2, p.d3}) > 15)
      throw Error("conv TP on the CPU: irreps of degree " + std::to_string((std::max({p.d1, p.d2, p.d3}) - 1) / 2) +
                  " exceed the kernels' l <= 7; evaluate this model with path reference");
  }
}

// The coupling maps of the paths (conv_tp_cpu_rows.h), from their terms in m3 order.
template <typename T>
struct Couplings {
  std::vector<T> c;
  std::vector<int32_t> offset;
  ConvTPCouplings<T> view;
  Couplings(const Couplings&) = delete;  // (view points into c and offset)
  explicit Couplings(const ConvTPTables<T>& t) {
    int size = 0;
    for (int i = 0; i < t.num_paths; ++i) {
      offset.push_back(size);
      size += t.paths[i].d1 * t.paths[i].d3;
    }
    size = (size + 15) / 16 * 16;
    c.assign(static_cast<std::size_t>(t.dim_sh) * size, T(0));
    for (int i = 0; i < t.num_paths; ++i) {
      const ConvTPKernelPath& p = t.paths[i];
      for (int32_t q = p.run_begin[kConvTPByM3]; q < p.run_end[kConvTPByM3]; ++q)
        for (int32_t k = t.runs[q].term_begin; k < t.runs[q].term_end; ++k)
          c[(p.y_offset + t.terms[k].b) * size + offset[i] + t.terms[k].a * p.d3 + t.runs[q].out] += t.coeff[k];
    }
    view = {c.data(), offset.data(), size};
  }
};

}  // namespace

template <typename T>
void conv_tp_forward_cpu(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, T* agg) {
  check_harmonic_sizes(t);
  const RowKernels<T> k = row_kernels<T>();
  const std::vector<Block> out_blocks = path_blocks(t, false);
  const std::vector<T> xt = transposed_rows(path_blocks(t, true), g.x, g.num_x, t.dim_in1);
  const Couplings<T> cm(t);
  const std::size_t nscratch = static_cast<std::size_t>(kConvTPEdgeBlock) * cm.view.size;
  parallel_with_scratch<T>(g.nrows, t.dim_mid + nscratch, 8, [&](int64_t row, T* scratch) {
    T* out = scratch + nscratch;
    std::fill(out, out + t.dim_mid, T(0));
    k.forward(t, cm.view, g, xt.data(), row, out, scratch);
    T* a = agg + row * t.dim_mid;
    std::fill(a, a + t.dim_mid, T(0));
    add_from_mu(out_blocks, out, a);
  });
}

template <typename T>
void conv_tp_backward_cpu(const ConvTPTables<T>& t, const ConvTPEdges<T>& edges, const ConvTPGradients<T>& d) {
  check_harmonic_sizes(t);
  const RowKernels<T> k = row_kernels<T>();
  const std::vector<Block> x_blocks = path_blocks(t, true);
  const std::vector<T> xt = transposed_rows(x_blocks, edges.x, edges.num_x, t.dim_in1);
  const std::vector<T> gt = transposed_rows(path_blocks(t, false), d.dagg, edges.nrows, t.dim_mid);
  const Couplings<T> cm(t);
  const std::size_t nscratch = static_cast<std::size_t>(cm.view.size);
  // The kernels start from edges: give them each edge's receiver row.
  ConvTPEdges<T> g = edges;
  std::vector<int64_t> edge_row;
  if (!g.edge_row) {
    edge_row.resize(static_cast<std::size_t>(g.num_edges));
    for (int64_t r = 0; r < g.nrows; ++r)
      std::fill(edge_row.begin() + g.row_ptr[r], edge_row.begin() + g.row_ptr[r + 1], r);
    g.edge_row = edge_row.data();
  }
  if (d.dR_by_radial_row && (g.radial_index || g.num_edges == 0)) {  // (no edges: every row zero)
    // dR summed per radial row by the thread that owns the row, over its edges in edge order: the
    // first written, the others added (what summing per-edge gradients in edge order gives, but for
    // the sign of a zero), rows without edges zeroed (no pass over all of dR beforehand).
    int64_t num_radial = g.num_radial;
    for (int64_t e = 0; e < g.num_edges; ++e) num_radial = std::max(num_radial, g.radial_index[e] + 1);
    std::vector<int64_t> ptr(static_cast<std::size_t>(num_radial) + 1, 0), order(g.num_edges);
    for (int64_t e = 0; e < g.num_edges; ++e) ++ptr[g.radial_index[e] + 1];
    for (int64_t r = 0; r < num_radial; ++r) ptr[r + 1] += ptr[r];
    std::vector<int64_t> fill(ptr.begin(), ptr.end() - 1);
    for (int64_t e = 0; e < g.num_edges; ++e) order[fill[g.radial_index[e]]++] = e;
    parallel_with_scratch<T>(num_radial, nscratch, 16, [&](int64_t r, T* m) {
      T* dr = d.dR + r * t.weight_numel;
      if (ptr[r] == ptr[r + 1]) std::fill(dr, dr + t.weight_numel, T(0));
      for (int64_t j = ptr[r]; j < ptr[r + 1]; ++j) k.backward(t, cm.view, g, d, xt.data(), gt.data(), order[j], dr, j > ptr[r], m);
    });
  } else {
    parallel_with_scratch<T>(g.num_edges, nscratch, 16, [&](int64_t e, T* m) {
      k.backward(t, cm.view, g, d, xt.data(), gt.data(), e, d.dR + e * t.weight_numel, false, m);
    });
  }
  if (!d.dx) return;
  parallel_with_scratch<T>(d.num_x_rows, t.dim_in1 + nscratch, 8, [&](int64_t xr, T* scratch) {
    T* dx = scratch + nscratch;
    std::fill(dx, dx + t.dim_in1, T(0));
    k.x_grad(t, cm.view, g, d, gt.data(), xr, dx, scratch);
    add_from_mu(x_blocks, dx, d.dx + (d.x_rows ? d.x_rows[xr] : xr) * t.dim_in1);
  });
}

template void conv_tp_forward_cpu<float>(const ConvTPTables<float>&, const ConvTPEdges<float>&, float*);
template void conv_tp_forward_cpu<double>(const ConvTPTables<double>&, const ConvTPEdges<double>&, double*);
template void conv_tp_backward_cpu<float>(const ConvTPTables<float>&, const ConvTPEdges<float>&,
                                          const ConvTPGradients<float>&);
template void conv_tp_backward_cpu<double>(const ConvTPTables<double>&, const ConvTPEdges<double>&,
                                           const ConvTPGradients<double>&);

}  // namespace flashmace
