#include "engine/ops/first_layer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/kernels/species_outer_kernels.h"

#if FLASHMACE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmace {

namespace {

template <typename T>
SpeciesOuterArgs<T> args(const at::Tensor& h, const at::Tensor& h_index, const at::Tensor& Y, const at::Tensor& slot,
                         const at::Tensor& row_ptr, int64_t Z, int64_t S_rows) {
  SpeciesOuterArgs<T> a;
  a.h = h.data_ptr<T>();
  if (h_index.defined()) a.h_index = h_index.data_ptr<int64_t>();
  a.Y = Y.data_ptr<T>();
  a.slot = slot.data_ptr<int64_t>();
  a.row_ptr = row_ptr.data_ptr<int64_t>();
  a.nrows = row_ptr.size(0) - 1;
  a.num_edges = Y.size(0);
  a.Z = static_cast<int>(Z);
  a.H = static_cast<int>(h.size(1));
  a.J = static_cast<int>(Y.size(1));
  a.stride_j = S_rows * Z * h.size(1);
  return a;
}

#if FLASHMACE_CUDA_KERNELS
void* stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
#endif

#if !FLASHMACE_CUDA_KERNELS
[[noreturn]] void no_cuda() {
  throw Error("first-layer sums: CUDA tensors given, but flashmace was built without its CUDA kernels");
}
#endif

// Whether the path's Wigner-3j is diagonal, c[m2, m3] = 0 for m2 != m3 (0 x l -> l always is).
bool diagonal(const ConvTPDescriptor& d, const ConvTPPathDescriptor& p) {
  if (p.d1 != 1 || p.d2 != p.d3) return false;
  for (int i = p.entry_begin; i < p.entry_end; ++i)
    if (d.entries[i].m2 != d.entries[i].m3) return false;
  return true;
}

}  // namespace

bool FirstLayerOp::applies(const ConvTPDescriptor& d) {
  if (d.paths.empty() || !species_outer_supports(d.dim_sh)) return false;
  for (const ConvTPPathDescriptor& p : d.paths)
    if (!diagonal(d, p)) return false;
  return true;
}

FirstLayerOp::FirstLayerOp(const ConvTPDescriptor& d, const at::Tensor& w_out)
    : d_(d), w_out_(w_out.contiguous()) {
  if (!applies(d)) throw Error("first-layer reassociation: the layer has a path other than 0 x l -> l");
  std::vector<int64_t> column(static_cast<std::size_t>(d.weight_numel), 0);
  std::vector<bool> read(static_cast<std::size_t>(d.dim_sh), false);
  for (const ConvTPPathDescriptor& p : d.paths) {
    for (int u = 0; u < p.mul; ++u) column[static_cast<std::size_t>(p.w_offset + u)] = p.x_offset + u;
    std::vector<double> c(static_cast<std::size_t>(p.d3), 0.0);
    for (int i = p.entry_begin; i < p.entry_end; ++i)
      c[static_cast<std::size_t>(d.entries[i].m3)] = p.alpha * d.entries[i].c;
    coupling_.push_back(at::tensor(c, at::kDouble).to(w_out.options()));
    // (equal up to the round-off of the computed Wigner-3j entries)
    const bool uniform =
        std::all_of(c.begin(), c.end(), [&](double v) { return std::abs(v - c.front()) <= 1e-14 * std::abs(c.front()); });
    uniform_coupling_.push_back(uniform ? c.front() : std::nan(""));
    for (int j = p.y_offset; j < p.y_offset + p.d2; ++j) read[static_cast<std::size_t>(j)] = true;
  }
  some_harmonic_unread_ = std::find(read.begin(), read.end(), false) != read.end();
  x_column_ = at::tensor(column, at::kLong).to(w_out.device());
}

at::Tensor FirstLayerOp::slot_weights(const at::Tensor& x) const {
  const int64_t Z = x.size(0), H = w_out_.size(0);
  return (x.index_select(1, x_column_).unsqueeze(1) * w_out_.unsqueeze(0)).view({Z * H, d_.weight_numel});
}

bool FirstLayerOp::fold_projection(const IrrepsLinear& project) {
  std::vector<FoldedPath> folded;
  for (std::size_t q = 0; q < d_.paths.size(); ++q) {
    const ConvTPPathDescriptor& p = d_.paths[q];
    if (std::isnan(uniform_coupling_[q])) return false;
    for (IrrepsLinear::Reader& r : project.readers(p.mid_offset, p.mul, p.d3))
      folded.push_back({static_cast<int>(q), r.out_offset, r.out_mul, true, r.weight * uniform_coupling_[q]});
  }
  // Which path writes each block first, whether the blocks cover every column, which harmonics no
  // folded path reads.
  std::vector<int> columns(static_cast<std::size_t>(project.out_dim()), 0);
  std::vector<bool> read(static_cast<std::size_t>(d_.dim_sh), false);
  for (FoldedPath& f : folded) {
    const ConvTPPathDescriptor& p = d_.paths[static_cast<std::size_t>(f.path)];
    f.first_writer = columns[static_cast<std::size_t>(f.out_offset)] == 0;
    for (int64_t c = f.out_offset; c < f.out_offset + f.out_mul * p.d3; ++c) ++columns[static_cast<std::size_t>(c)];
    for (int j = p.y_offset; j < p.y_offset + p.d2; ++j) read[static_cast<std::size_t>(j)] = true;
  }
  folded_cover_every_column_ = std::find(columns.begin(), columns.end(), 0) == columns.end();
  some_harmonic_unprojected_ = std::find(read.begin(), read.end(), false) != read.end();
  // One bmm for all paths where each folds once, alike, with its radial weights side by side.
  bool alike = folded.size() == d_.paths.size();
  for (std::size_t i = 0; alike && i < folded.size(); ++i) {
    const ConvTPPathDescriptor& p = d_.paths[static_cast<std::size_t>(folded[i].path)];
    alike = folded[i].path == static_cast<int>(i) && p.mul == d_.paths[0].mul && p.w_offset == static_cast<int>(i) * p.mul &&
            folded[i].out_mul == folded[0].out_mul;
  }
  if (alike && !folded.empty() && d_.weight_numel == static_cast<int>(folded.size()) * d_.paths[0].mul) {
    std::vector<at::Tensor> w;
    for (const FoldedPath& f : folded) w.push_back(f.weight);
    folded_stack_ = at::stack(w);
  }
  folded_ = std::move(folded);
  folded_projection_ = true;
  out_ir_mul_ = project.out_layout() == IrrepsLayout::IrMul;
  return true;
}

std::vector<at::Tensor> FirstLayerOp::projected_weights(const at::Tensor& x) const {
  const at::Tensor w = slot_weights(x);
  const int64_t zh = w.size(0);
  std::vector<at::Tensor> B;
  if (folded_stack_.defined()) {
    const int64_t Q = folded_stack_.size(0), mul = folded_stack_.size(1);
    const at::Tensor all = at::bmm(w.view({zh, Q, mul}).transpose(0, 1), folded_stack_);
    for (int64_t q = 0; q < Q; ++q) B.push_back(all[q]);
    return B;
  }
  for (const FoldedPath& f : folded_) {
    const ConvTPPathDescriptor& p = d_.paths[static_cast<std::size_t>(f.path)];
    B.push_back(at::mm(w.narrow(1, p.w_offset, p.mul), f.weight));
  }
  return B;
}

void FirstLayerOp::project_into(const at::Tensor& S, const at::Tensor& x, const at::Tensor& y, bool accumulate) const {
  if (!folded_projection_) throw Error("first-layer reassociation: project_into without a folded projection");
  const int64_t n = S.size(1), zh = S.size(2) * S.size(3);
  if (n == 0) return;
  const at::Tensor Sc = S.contiguous();
  const std::vector<at::Tensor> B = projected_weights(x);
  if (!accumulate && !folded_cover_every_column_) {
    y.zero_();
    accumulate = true;
  }
  for (std::size_t i = 0; i < folded_.size(); ++i) {
    const FoldedPath& f = folded_[i];
    const ConvTPPathDescriptor& p = d_.paths[static_cast<std::size_t>(f.path)];
    if (out_ir_mul_) {  // [d2, n, Z H] x [Z H, out mul] straight into the block's components [m][row, v]
      at::Tensor target = y.narrow(1, f.out_offset, f.out_mul * p.d3).view({n, p.d3, f.out_mul}).transpose(0, 1);
      const at::Tensor a = Sc.narrow(0, p.y_offset, p.d2).view({p.d2, n, zh});
      const at::Tensor b = B[i].unsqueeze(0).expand({p.d2, zh, f.out_mul});
      if (accumulate || !f.first_writer)
        target.baddbmm_(a, b);
      else
        at::bmm_out(target, a, b);
      continue;
    }
    // [d2 n, Z H] x [Z H, out mul] -> r[m, row, v]; y[row, v, m] = r[m, row, v]
    const at::Tensor r = at::mm(Sc.narrow(0, p.y_offset, p.d2).view({p.d2 * n, zh}), B[i]);
    const at::Tensor target = y.narrow(1, f.out_offset, f.out_mul * p.d3).view({n, f.out_mul, p.d3});
    const at::Tensor source = r.view({p.d2, n, f.out_mul}).permute({1, 2, 0});
    if (accumulate || !f.first_writer)
      target.add_(source);
    else
      target.copy_(source);
  }
}

at::Tensor FirstLayerOp::project_backward(const at::Tensor& dy, const at::Tensor& x, int64_t H) const {
  if (!folded_projection_) throw Error("first-layer reassociation: project_backward without a folded projection");
  const int64_t n = dy.size(0), Z = x.size(0);
  at::Tensor dS = some_harmonic_unprojected_ ? at::zeros({d_.dim_sh, n, Z, H}, dy.options())
                                             : at::empty({d_.dim_sh, n, Z, H}, dy.options());
  if (n == 0) return dS;
  const std::vector<at::Tensor> B = projected_weights(x);
  std::vector<bool> written(static_cast<std::size_t>(d_.dim_sh), false);
  for (std::size_t i = 0; i < folded_.size(); ++i) {
    const FoldedPath& f = folded_[i];
    const ConvTPPathDescriptor& p = d_.paths[static_cast<std::size_t>(f.path)];
    if (out_ir_mul_) {  // dy's block components [m][row, v] times B_p^T -> dS[y_p + m, row, z, k]
      const at::Tensor g = dy.narrow(1, f.out_offset, f.out_mul * p.d3).view({n, p.d3, f.out_mul}).transpose(0, 1);
      const at::Tensor bt = B[i].t().unsqueeze(0).expand({p.d3, f.out_mul, Z * H});
      at::Tensor target = dS.narrow(0, p.y_offset, p.d2).view({p.d2, n, Z * H});
      if (written[static_cast<std::size_t>(p.y_offset)])
        target.baddbmm_(g, bt);
      else
        at::bmm_out(target, g, bt);
      for (int j = p.y_offset; j < p.y_offset + p.d2; ++j) written[static_cast<std::size_t>(j)] = true;
      continue;
    }
    // g[m, row, v] = dy[row, v, m], times B_p^T -> dS[y_p + m, row, z, k]
    const at::Tensor g =
        dy.narrow(1, f.out_offset, f.out_mul * p.d3).view({n, f.out_mul, p.d3}).permute({2, 0, 1}).contiguous();
    at::Tensor target = dS.narrow(0, p.y_offset, p.d2).view({p.d2 * n, Z * H});
    if (written[static_cast<std::size_t>(p.y_offset)])
      target.addmm_(g.view({p.d3 * n, f.out_mul}), B[i].t());
    else
      at::mm_out(target, g.view({p.d3 * n, f.out_mul}), B[i].t());
    for (int j = p.y_offset; j < p.y_offset + p.d2; ++j) written[static_cast<std::size_t>(j)] = true;
  }
  return dS;
}

at::Tensor FirstLayerOp::sums(const at::Tensor& h, const at::Tensor& Y, const at::Tensor& slot,
                              const at::Tensor& row_ptr, int64_t nrows, int64_t Z, const at::Tensor& h_index) const {
  const at::Tensor hc = h.contiguous(), Yc = Y.contiguous(), sc = slot.contiguous(), rp = row_ptr.contiguous();
  const at::Tensor hi = h_index.defined() ? h_index.contiguous() : at::Tensor();
  at::Tensor S = at::zeros({Y.size(1), nrows, Z, h.size(1)}, h.options());
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "first_layer_sums", [&] {
    const SpeciesOuterArgs<scalar_t> a = args<scalar_t>(hc, hi, Yc, sc, rp, Z, nrows);
    if (h.is_cpu()) {
      species_outer_forward_cpu(a, S.data_ptr<scalar_t>());
    } else {
#if FLASHMACE_CUDA_KERNELS
      const c10::cuda::CUDAGuard guard(h.device());
      species_outer_forward_cuda(a, S.data_ptr<scalar_t>(), stream_of(h));
#else
      no_cuda();
#endif
    }
  });
  return S;
}

at::Tensor FirstLayerOp::aggregate(const at::Tensor& S, const at::Tensor& x) const {
  const int64_t n = S.size(1), zh = S.size(2) * S.size(3);
  const at::Tensor Sc = S.contiguous(), w = slot_weights(x);
  at::Tensor agg = at::empty({n, d_.dim_mid}, S.options());
  for (std::size_t q = 0; q < d_.paths.size(); ++q) {
    const ConvTPPathDescriptor& p = d_.paths[q];
    // [d2 n, Z H] x [Z H, mul] -> t[m, row, u]; agg[row, u, m] = c_p[m] t[m, row, u]
    const at::Tensor t = at::mm(Sc.narrow(0, p.y_offset, p.d2).view({p.d2 * n, zh}), w.narrow(1, p.w_offset, p.mul));
    at::Tensor out = agg.narrow(1, p.mid_offset, p.mul * p.d3).view({n, p.mul, p.d3});
    at::mul_out(out, t.view({p.d2, n, p.mul}).permute({1, 2, 0}), coupling_[q]);
  }
  return agg;
}

at::Tensor FirstLayerOp::aggregate_backward(const at::Tensor& dagg, const at::Tensor& x, int64_t H) const {
  const int64_t n = dagg.size(0), Z = x.size(0);
  at::Tensor dS = some_harmonic_unread_ ? at::zeros({d_.dim_sh, n, Z, H}, dagg.options())
                         : at::empty({d_.dim_sh, n, Z, H}, dagg.options());
  const at::Tensor w = slot_weights(x);
  std::vector<bool> written(static_cast<std::size_t>(d_.dim_sh), false);
  for (std::size_t q = 0; q < d_.paths.size(); ++q) {
    const ConvTPPathDescriptor& p = d_.paths[q];
    // g[m, row, u] = c_p[m] dagg[row, u, m], times W'_p^T -> dS[y_p + m, row, z, k]
    at::Tensor g = at::empty({p.d3, n, p.mul}, dagg.options());
    at::mul_out(g, dagg.narrow(1, p.mid_offset, p.mul * p.d3).view({n, p.mul, p.d3}).permute({2, 0, 1}),
                coupling_[q].view({p.d3, 1, 1}));
    at::Tensor target = dS.narrow(0, p.y_offset, p.d2).view({p.d2 * n, Z * H});
    const at::Tensor wt = w.narrow(1, p.w_offset, p.mul).t();
    if (written[static_cast<std::size_t>(p.y_offset)])
      target.addmm_(g.view({p.d3 * n, p.mul}), wt);
    else
      at::mm_out(target, g.view({p.d3 * n, p.mul}), wt);
    for (int j = p.y_offset; j < p.y_offset + p.d2; ++j) written[static_cast<std::size_t>(j)] = true;
  }
  return dS;
}

std::pair<at::Tensor, at::Tensor> FirstLayerOp::sums_backward(const at::Tensor& dS, const at::Tensor& h,
                                                              const at::Tensor& Y, const at::Tensor& slot,
                                                              const at::Tensor& row_ptr,
                                                              const at::Tensor& h_index) const {
  const at::Tensor hc = h.contiguous(), Yc = Y.contiguous(), sc = slot.contiguous(), rp = row_ptr.contiguous();
  const at::Tensor hi = h_index.defined() ? h_index.contiguous() : at::Tensor();
  const at::Tensor dSc = dS.contiguous();
  const int64_t E = Y.size(0), nrows = rp.size(0) - 1;
  // Each edge's row, for CUDA's per-edge kernel (when the dS slabs do not fit; the CPU runs by row).
  bool per_edge = false;
#if FLASHMACE_CUDA_KERNELS
  if (!h.is_cpu()) {
    const int Z = static_cast<int>(dS.size(2)), H = static_cast<int>(h.size(1)), J = static_cast<int>(Y.size(1));
    per_edge = h.scalar_type() == at::kFloat ? !species_outer_cuda_stages_slabs<float>(Z, H, J)
                                             : !species_outer_cuda_stages_slabs<double>(Z, H, J);
  }
#endif
  const at::Tensor edge_row =
      per_edge ? at::repeat_interleave(at::arange(nrows, rp.options()), rp.diff(), 0, E) : at::Tensor();
  at::Tensor dh = at::empty({E, h.size(1)}, h.options()), dY = at::empty_like(Yc);
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "first_layer_sums_backward", [&] {
    SpeciesOuterArgs<scalar_t> a = args<scalar_t>(hc, hi, Yc, sc, rp, dS.size(2), dS.size(1));
    if (edge_row.defined()) a.edge_row = edge_row.data_ptr<int64_t>();
    if (h.is_cpu()) {
      species_outer_backward_cpu(a, dSc.data_ptr<scalar_t>(), dh.data_ptr<scalar_t>(), dY.data_ptr<scalar_t>());
    } else {
#if FLASHMACE_CUDA_KERNELS
      const c10::cuda::CUDAGuard guard(h.device());
      species_outer_backward_cuda(a, dSc.data_ptr<scalar_t>(), dh.data_ptr<scalar_t>(), dY.data_ptr<scalar_t>(),
                                  stream_of(h));
#else
      no_cuda();
#endif
    }
  });
  return {dh, dY};
}

}  // namespace flashmace
