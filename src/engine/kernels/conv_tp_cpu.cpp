// Conv TP message kernels on the CPU (mace_spec.md 5.2; the math and layouts: conv_tp_kernels.h).
// e3nn stores a block of `mul` copies of an irrep as [u][m]; the node features x and the output
// gradients dagg are transposed here once per call to [m][u], so that the row kernels
// (conv_tp_cpu_rows.h, one build per instruction set, chosen by cpu_isa()) run every inner loop over
// the channel u with unit stride in vector registers; their outputs are transposed back.
// Parallel decomposition (OpenMP when built with it, else serial), each output owned by one thread:
//   forward:      one thread per receiver row: agg[row] summed over the row's edges in order;
//   dR, dY:       one thread per receiver row, for that row's edges (dR[e], dY[e] written);
//   dx (+=):      one thread per x row, over its edges in x_perm order.
#include <algorithm>
#include <vector>

#include "engine/kernels/conv_tp_core.h"
#include "engine/kernels/conv_tp_cpu_rows.h"
#include "engine/kernels/cpu_isa.h"

namespace flashmace {

namespace {

template <typename F>
void parallel_rows(int64_t n, const F& body) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 8)
#endif
  for (int64_t r = 0; r < n; ++r) body(r);
}

template <typename T>
struct RowKernels {
  void (*forward)(const ConvTPTables<T>&, const ConvTPEdges<T>&, const T*, int64_t, T*, T*);
  void (*backward)(const ConvTPTables<T>&, const ConvTPEdges<T>&, const ConvTPGradients<T>&, const T*, const T*,
                   int64_t, T*);
  void (*x_grad)(const ConvTPTables<T>&, const ConvTPEdges<T>&, const ConvTPGradients<T>&, const T*, int64_t, T*,
                 T*);
};

template <typename T>
RowKernels<T> row_kernels() {
  switch (cpu_isa()) {
    case CpuIsa::avx512:
      return {cpu_avx512::conv_tp_forward_row, cpu_avx512::conv_tp_backward_row, cpu_avx512::conv_tp_x_grad_row};
    case CpuIsa::avx2:
      return {cpu_avx2::conv_tp_forward_row, cpu_avx2::conv_tp_backward_row, cpu_avx2::conv_tp_x_grad_row};
    case CpuIsa::portable:
      break;
  }
  return {cpu_portable::conv_tp_forward_row, cpu_portable::conv_tp_backward_row, cpu_portable::conv_tp_x_grad_row};
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

}  // namespace

template <typename T>
int conv_tp_max_terms(const ConvTPTables<T>& t) {
  int n = 1;
  for (int i = 0; i < t.num_paths; ++i)
    for (int order : {kConvTPByM3, kConvTPByM2, kConvTPByM1}) {
      const ConvTPKernelPath& p = t.paths[i];
      if (p.run_end[order] > p.run_begin[order])
        n = std::max(n, t.runs[p.run_end[order] - 1].term_end - t.runs[p.run_begin[order]].term_begin);
    }
  return n;
}

template <typename T>
void conv_tp_forward_cpu(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, T* agg) {
  const RowKernels<T> k = row_kernels<T>();
  const std::vector<Block> out_blocks = path_blocks(t, false);
  const std::vector<T> xt = transposed_rows(path_blocks(t, true), g.x, g.num_x, t.dim_in1);
  const std::size_t nterms = static_cast<std::size_t>(conv_tp_max_terms(t));
  parallel_rows(g.nrows, [&](int64_t row) {
    std::vector<T> out(static_cast<std::size_t>(t.dim_mid), T(0)), cy(nterms);
    k.forward(t, g, xt.data(), row, out.data(), cy.data());
    T* a = agg + row * t.dim_mid;
    std::fill(a, a + t.dim_mid, T(0));
    add_from_mu(out_blocks, out.data(), a);
  });
}

template <typename T>
void conv_tp_backward_cpu(const ConvTPTables<T>& t, const ConvTPEdges<T>& edges, const ConvTPGradients<T>& d) {
  const RowKernels<T> k = row_kernels<T>();
  const std::vector<Block> x_blocks = path_blocks(t, true);
  const std::vector<T> xt = transposed_rows(x_blocks, edges.x, edges.num_x, t.dim_in1);
  const std::vector<T> gt = transposed_rows(path_blocks(t, false), d.dagg, edges.nrows, t.dim_mid);
  const std::size_t nterms = static_cast<std::size_t>(conv_tp_max_terms(t));
  parallel_rows(edges.nrows, [&](int64_t row) {
    std::vector<T> cy(nterms);
    k.backward(t, edges, d, xt.data(), gt.data(), row, cy.data());
  });
  if (!d.dx) return;
  // The x-row pass starts from edges: give it each edge's receiver row.
  ConvTPEdges<T> g = edges;
  std::vector<int64_t> edge_row;
  if (!g.edge_row) {
    edge_row.resize(static_cast<std::size_t>(g.num_edges));
    for (int64_t e = 0; e < g.num_edges; ++e) edge_row[e] = conv_tp_edge_row(g, e);
    g.edge_row = edge_row.data();
  }
  parallel_rows(g.num_x, [&](int64_t xr) {
    std::vector<T> dx(static_cast<std::size_t>(t.dim_in1), T(0)), cy(nterms);
    k.x_grad(t, g, d, gt.data(), xr, dx.data(), cy.data());
    add_from_mu(x_blocks, dx.data(), d.dx + xr * t.dim_in1);
  });
}

template int conv_tp_max_terms<float>(const ConvTPTables<float>&);
template int conv_tp_max_terms<double>(const ConvTPTables<double>&);
template void conv_tp_forward_cpu<float>(const ConvTPTables<float>&, const ConvTPEdges<float>&, float*);
template void conv_tp_forward_cpu<double>(const ConvTPTables<double>&, const ConvTPEdges<double>&, double*);
template void conv_tp_backward_cpu<float>(const ConvTPTables<float>&, const ConvTPEdges<float>&,
                                          const ConvTPGradients<float>&);
template void conv_tp_backward_cpu<double>(const ConvTPTables<double>&, const ConvTPEdges<double>&,
                                           const ConvTPGradients<double>&);

}  // namespace flashmace
