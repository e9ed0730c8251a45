// Conv TP message kernels on the CPU (mace_spec.md 5.2; the math and layouts: conv_tp_kernels.h).
// e3nn stores a block of `mul` copies of an irrep as [u][m]; the node features x and the output
// gradients dagg are transposed here once per call to [m][u], so that the row kernels
// (conv_tp_cpu_rows.h, one build per instruction set, chosen by cpu_isa()) run every inner loop over
// the channel u with unit stride in vector registers; their outputs are transposed back.
// Parallel decomposition (OpenMP when built with it, else serial), each output owned by one thread:
//   forward:      one thread per receiver row: agg[row] summed over the row's edges in order;
//   backward:     the receiver rows cut into one part per thread (equal edge counts), each part's
//                 rows in order: each edge's dR and dY written (dR summed per radial row: written by
//                 the first edge, the others added in edge order, those after an edge of another
//                 part through a waiting row added after the parts), its dx from the same sweep
//                 summed into the part's own window of x rows, then over the parts in order (for
//                 windows too large: one thread per x row of the CSR, over its edges in x_perm order).
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/kernels/conv_tp_cpu_rows.h"
#include "core/cpu_isa.h"
#include "core/cpu_threads.h"

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
  void (*backward_row)(const ConvTPTables<T>&, const ConvTPCouplings<T>&, const ConvTPEdges<T>&,
                       const ConvTPGradients<T>&, const T*, const T*, int64_t, const ConvTPBackwardPass<T>&, T*);
  void (*x_grad)(const ConvTPTables<T>&, const ConvTPCouplings<T>&, const ConvTPEdges<T>&, const ConvTPGradients<T>&,
                 const T*, int64_t, T*, T*);
};

template <typename T>
RowKernels<T> row_kernels() {
  // (cpu_isa() names only instruction sets built into this binary)
#if FLASHMACE_CPU_X86_VARIANTS
  switch (cpu_isa()) {
    case CpuIsa::avx512:
      return {cpu_avx512::conv_tp_forward_row, cpu_avx512::conv_tp_backward_row, cpu_avx512::conv_tp_x_grad_row};
    case CpuIsa::avx2:
      return {cpu_avx2::conv_tp_forward_row, cpu_avx2::conv_tp_backward_row, cpu_avx2::conv_tp_x_grad_row};
    case CpuIsa::portable:
      break;
  }
#else
  static_cast<void>(cpu_isa());
#endif
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

// The backward's row-major plan: the receiver rows cut into parts of about equal edge counts, one
// part per thread, each with a window of the x rows its edges send from, where the part's dx is summed.
template <typename T>
struct RowParts {
  std::vector<int64_t> row_begin;  // [parts + 1]
  std::vector<int64_t> x_begin, x_end;
  std::vector<std::vector<T>> dx;  // [parts][(x_end - x_begin) * dim_in1], [m][u]
};

template <typename T>
RowParts<T> row_parts(const ConvTPEdges<T>& g, int64_t parts) {
  RowParts<T> rp;
  rp.row_begin.push_back(0);
  for (int64_t p = 1; p < parts; ++p) {
    const int64_t target = g.num_edges * p / parts;
    rp.row_begin.push_back(std::upper_bound(g.row_ptr + rp.row_begin.back(), g.row_ptr + g.nrows, target) - g.row_ptr - 1);
    rp.row_begin.back() = std::max(rp.row_begin.back(), rp.row_begin[rp.row_begin.size() - 2]);
  }
  rp.row_begin.push_back(g.nrows);
  rp.dx.resize(static_cast<std::size_t>(parts));
  for (int64_t p = 0; p < parts; ++p) {
    int64_t lo = g.num_x, hi = 0;
    for (int64_t e = g.row_ptr[rp.row_begin[p]]; e < g.row_ptr[rp.row_begin[p + 1]]; ++e) {
      lo = std::min(lo, g.xindex[e]);
      hi = std::max(hi, g.xindex[e] + 1);
    }
    rp.x_begin.push_back(lo);
    rp.x_end.push_back(std::max(lo, hi));
  }
  return rp;
}

// With dR summed per radial row: each edge's rank in its row, and where its dR goes (conv_tp_backward_cpu).
template <typename T>
struct RadialRowPlan {
  std::vector<int32_t> rank;
  std::vector<int64_t> dr_slot;       // per edge: -1 (its radial row) or its waiting row
  std::vector<int64_t> waiting_edge;  // per waiting row, its edge (in edge order)
  std::vector<T> own_waiting;         // (without the caller's d.waiting_rows)
  int64_t num_radial = 0;

  // Sets pass's rank, dr_slot and waiting; writes zeros to the rows of dR that no edge uses.
  void build(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const RowParts<T>& rp, const ConvTPGradients<T>& d,
             ConvTPBackwardPass<T>* pass) {
    const int64_t parts = static_cast<int64_t>(rp.row_begin.size()) - 1;
    num_radial = g.num_radial;
    for (int64_t e = 0; e < g.num_edges; ++e) num_radial = std::max(num_radial, g.radial_index[e] + 1);
    std::vector<int32_t> count(static_cast<std::size_t>(num_radial), 0);
    std::vector<int32_t> first_part(static_cast<std::size_t>(num_radial), -1);
    rank.resize(static_cast<std::size_t>(g.num_edges));
    dr_slot.resize(static_cast<std::size_t>(g.num_edges));
    int32_t part = 0;  // edge e's part: the rows of part p hold edges [row_ptr[row_begin[p]], row_ptr[row_begin[p + 1]])
    for (int64_t e = 0; e < g.num_edges; ++e) {
      while (part < parts && e >= g.row_ptr[rp.row_begin[part + 1]]) ++part;
      const int64_t r = g.radial_index[e];
      rank[e] = count[r]++;
      if (rank[e] == 0) first_part[r] = part;
      const bool here = part < parts && first_part[r] == part;
      dr_slot[e] = here ? -1 : static_cast<int64_t>(waiting_edge.size());
      if (!here) {
        first_part[r] = -1;  // (the row's later edges wait too)
        waiting_edge.push_back(e);
      }
    }
    pass->rank = rank.data();
    pass->dr_slot = dr_slot.data();
    const int64_t n = static_cast<int64_t>(waiting_edge.size()) * t.weight_numel;
    if (n > 0 && d.waiting_rows) {
      pass->waiting = d.waiting_rows(n);
    } else if (n > 0) {
      own_waiting.resize(static_cast<std::size_t>(n));
      pass->waiting = own_waiting.data();
    }
    parallel_rows(num_radial, [&](int64_t r) {  // rows without edges: zeros
      if (count[r] == 0) std::fill(d.dR + r * t.weight_numel, d.dR + (r + 1) * t.weight_numel, T(0));
    });
  }

  // The waiting rows added to their radial rows of dR, each radial row's in edge order (a thread per row).
  void add_waiting_rows(const ConvTPTables<T>& t, const ConvTPEdges<T>& g, const T* waiting, T* dR) const {
    if (waiting_edge.empty()) return;
    std::vector<int64_t> heads;
    std::vector<int64_t> next(waiting_edge.size(), -1), tail(static_cast<std::size_t>(num_radial), -1);
    for (int64_t s = 0; s < static_cast<int64_t>(waiting_edge.size()); ++s) {
      const int64_t r = g.radial_index[waiting_edge[s]];
      if (tail[r] < 0)
        heads.push_back(s);
      else
        next[tail[r]] = s;
      tail[r] = s;
    }
    parallel_rows(static_cast<int64_t>(heads.size()), [&](int64_t h) {
      T* out = dR + g.radial_index[waiting_edge[heads[h]]] * t.weight_numel;
      for (int64_t s = heads[h]; s >= 0; s = next[s]) {
        const T* w = waiting + s * t.weight_numel;
        for (int j = 0; j < t.weight_numel; ++j) out[j] += w[j];
      }
    });
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
  // Row-major: a row's g (dim_mid values, tens of kB) stays in cache over its edges, where a pass per
  // pair or per sender reads it once per edge. With dR summed per radial row, a row is written by its
  // first edge and added to by the others in edge order, as per-edge gradients summed in edge order. An
  // edge whose row's earlier edges all fall in its own part (thread) adds its dR there; the others (a
  // row shared across parts, from its first edge in another part on) write theirs to a waiting row,
  // added after the parts, so that no two threads touch one row at once and every edge's M, W and
  // inputs are swept once.
  ConvTPBackwardPass<T> pass;
  pass.dr_by_radial_row = d.dR_by_radial_row && (g.radial_index || g.num_edges == 0);  // (no edges: every row zero)
  RowParts<T> rp = row_parts(g, std::max<int64_t>(1, std::min<int64_t>(cpu_threads(), g.nrows)));
  const int64_t parts = static_cast<int64_t>(rp.row_begin.size()) - 1;
  RadialRowPlan<T> plan;
  if (pass.dr_by_radial_row) plan.build(t, g, rp, d, &pass);
  // dx summed per part in its window of x rows, then over the parts in order (deterministic for a given
  // thread count), unless the windows would hold more than twice dx (atoms far from any space-filling
  // order): then per x row over its edges (x_perm), reading the receivers' g once per edge.
  int64_t window_rows = 0;
  for (int64_t p = 0; p < parts; ++p) window_rows += rp.x_end[p] - rp.x_begin[p];
  const bool windows = d.dx && window_rows <= std::max<int64_t>(2 * g.num_x, 64);
  parallel_with_scratch<T>(parts, nscratch, 1, [&](int64_t p, T* m) {
    ConvTPBackwardPass<T> part = pass;
    if (windows) {
      rp.dx[p].assign(static_cast<std::size_t>(rp.x_end[p] - rp.x_begin[p]) * t.dim_in1, T(0));
      part.dx = rp.dx[p].data();
      part.x_begin = rp.x_begin[p];
    }
    for (int64_t row = rp.row_begin[p]; row < rp.row_begin[p + 1]; ++row)
      k.backward_row(t, cm.view, g, d, xt.data(), gt.data(), row, part, m);
  });
  plan.add_waiting_rows(t, g, pass.waiting, d.dR);
  if (!d.dx) return;
  if (windows) {
    int64_t lo = g.num_x, hi = 0;
    for (int64_t p = 0; p < parts; ++p)
      if (rp.x_end[p] > rp.x_begin[p]) {
        lo = std::min(lo, rp.x_begin[p]);
        hi = std::max(hi, rp.x_end[p]);
      }
    parallel_with_scratch<T>(std::max<int64_t>(0, hi - lo), t.dim_in1, 8, [&](int64_t i, T* dx) {
      const int64_t xr = lo + i;
      std::fill(dx, dx + t.dim_in1, T(0));
      for (int64_t p = 0; p < parts; ++p)
        if (xr >= rp.x_begin[p] && xr < rp.x_end[p]) {
          const T* w = rp.dx[p].data() + (xr - rp.x_begin[p]) * t.dim_in1;
          for (int j = 0; j < t.dim_in1; ++j) dx[j] += w[j];
        }
      add_from_mu(x_blocks, dx, d.dx + xr * t.dim_in1);
    });
    return;
  }
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
