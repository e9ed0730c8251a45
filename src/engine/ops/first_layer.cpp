#include "engine/ops/first_layer.h"

#include <algorithm>

#include "core/error.h"
#include "engine/kernels/first_layer_kernels.h"
#include "engine/kernels/species_outer_kernels.h"

#if FLASHMACE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmace {

namespace {

template <typename T>
SpeciesOuterArgs<T> args(const at::Tensor& h, const at::Tensor& h_index, const at::Tensor& Y, const at::Tensor& slot,
                         const at::Tensor& row_ptr, int64_t Z) {
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

}  // namespace

bool FirstLayerOp::applies(const ConvTPDescriptor& d) {
  if (d.paths.empty() || !species_outer_supports(d.dim_sh)) return false;
  for (const ConvTPPathDescriptor& p : d.paths)
    if (p.d1 != 1) return false;
  return true;
}

FirstLayerOp::FirstLayerOp(const ConvTPDescriptor& d, const at::Tensor& w_out) : d_(d), w_out_(w_out.contiguous()) {
  if (!applies(d)) throw Error("first-layer reassociation: the layer has a path with non-scalar input");
  for (const ConvTPPathDescriptor& p : d.paths) {
    at::Tensor c = at::zeros({p.d2, p.d3}, at::kDouble);
    for (int i = p.entry_begin; i < p.entry_end; ++i) {
      const ConvTPW3jEntry& e = d.entries[i];
      c[e.m2][e.m3] = p.alpha * e.c;
    }
    c_.push_back(c.to(w_out.options()));
  }
  if (w_out.is_cuda()) {
    // The kernels take blocks up to l = 4 and the sizes first_layer_cuda_supports allows; their
    // backward writes each harmonic from the one path that reads it (none: zeroed first; several: the
    // ATen formulation).
    std::vector<int> readers(static_cast<std::size_t>(d.dim_sh), 0);
    std::vector<int32_t> table;
    std::vector<double> entry_c;
    forward_kernel_ = backward_kernel_ = true;
    for (const ConvTPPathDescriptor& p : d.paths) {
      table.insert(table.end(), {p.x_offset, p.y_offset, p.mid_offset, p.w_offset, p.mul, p.d2, p.d3, p.entry_begin,
                                 p.entry_end});
      forward_kernel_ = forward_kernel_ && p.d2 <= kFirstLayerMaxDim && p.d3 <= kFirstLayerMaxDim;
      for (int j = p.y_offset; j < p.y_offset + p.d2; ++j) ++readers[static_cast<std::size_t>(j)];
    }
    for (int r : readers) {
      backward_kernel_ = backward_kernel_ && r <= 1;
      zero_unread_harmonics_ = zero_unread_harmonics_ || r == 0;
    }
    for (const ConvTPPathDescriptor& p : d.paths) max_mul_ = std::max(max_mul_, p.mul);
    forward_kernel_ = forward_kernel_ && first_layer_cuda_supports(static_cast<int>(w_out.size(0)), max_mul_,
                                                                   w_out.scalar_type() == at::kDouble);
    backward_kernel_ = backward_kernel_ && forward_kernel_;
    for (const ConvTPPathDescriptor& p : d.paths)
      for (int i = p.entry_begin; i < p.entry_end; ++i) entry_c.push_back(p.alpha * d.entries[i].c);
    for (const ConvTPW3jEntry& e : d.entries) table.insert(table.end(), {e.m2, e.m3});
    static_assert(sizeof(FirstLayerPath) == 9 * sizeof(int32_t), "FirstLayerPath is packed as 9 ints");
    device_paths_ = at::tensor(table, at::kInt).to(w_out.device());
    device_entry_c_ = at::tensor(entry_c, at::kDouble).to(w_out.options());
    w_out_t_ = w_out_.t().contiguous();
  }
}

template <typename T>
FirstLayerArgs<T> FirstLayerOp::device_args(const at::Tensor& x, int64_t nrows) const {
  FirstLayerArgs<T> a;
  a.paths = reinterpret_cast<const FirstLayerPath*>(device_paths_.data_ptr<int32_t>());
  a.num_paths = static_cast<int>(d_.paths.size());
  a.entry_m = device_paths_.data_ptr<int32_t>() + 9 * a.num_paths;
  a.entry_c = device_entry_c_.data_ptr<T>();
  a.max_mul = max_mul_;
  a.x = x.data_ptr<T>();
  a.Z = static_cast<int>(x.size(0));
  a.x_stride = static_cast<int>(x.size(1));
  a.w = w_out_.data_ptr<T>();
  a.wt = w_out_t_.data_ptr<T>();
  a.H = static_cast<int>(w_out_.size(0));
  a.w_stride = static_cast<int>(w_out_.size(1));
  a.J = d_.dim_sh;
  a.dim_mid = d_.dim_mid;
  a.nrows = nrows;
  return a;
}

at::Tensor FirstLayerOp::sums(const at::Tensor& h, const at::Tensor& Y, const at::Tensor& slot,
                              const at::Tensor& row_ptr, int64_t nrows, int64_t Z, const at::Tensor& h_index) const {
  const at::Tensor hc = h.contiguous(), Yc = Y.contiguous(), sc = slot.contiguous(), rp = row_ptr.contiguous();
  const at::Tensor hi = h_index.defined() ? h_index.contiguous() : at::Tensor();
  at::Tensor S = at::zeros({nrows, Z, h.size(1), Y.size(1)}, h.options());
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "first_layer_sums", [&] {
    const SpeciesOuterArgs<scalar_t> a = args<scalar_t>(hc, hi, Yc, sc, rp, Z);
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
  const int64_t n = S.size(0), Z = S.size(1), H = S.size(2);
  at::Tensor agg = at::empty({n, d_.dim_mid}, S.options());
#if FLASHMACE_CUDA_KERNELS
  if (S.is_cuda() && forward_kernel_) {
    const at::Tensor Sc = S.contiguous(), xc = x.contiguous();
    const c10::cuda::CUDAGuard guard(S.device());
    AT_DISPATCH_FLOATING_TYPES(S.scalar_type(), "first_layer_aggregate", [&] {
      first_layer_aggregate_cuda(device_args<scalar_t>(xc, n), Sc.data_ptr<scalar_t>(), agg.data_ptr<scalar_t>(),
                                 stream_of(S));
    });
    return agg;
  }
#endif
  for (std::size_t q = 0; q < d_.paths.size(); ++q) {
    const ConvTPPathDescriptor& p = d_.paths[q];
    // T[n, Z, d3, H] = C_p^T S_p, then G = T W_p [n, Z, d3, C], then agg_p = sum_z x[z, u] G.
    const at::Tensor t = at::matmul(c_[q].t(), S.narrow(3, p.y_offset, p.d2).transpose(2, 3)).contiguous();
    const at::Tensor g =
        at::mm(t.view({n * Z * p.d3, H}), w_out_.narrow(1, p.w_offset, p.mul)).view({n, Z, p.d3, p.mul});
    const at::Tensor xz = x.narrow(1, p.x_offset, p.mul).view({1, Z, 1, p.mul});
    agg.narrow(1, p.mid_offset, p.mul * p.d3).view({n, p.mul, p.d3}).copy_((g * xz).sum(1).transpose(1, 2));
  }
  return agg;
}

at::Tensor FirstLayerOp::aggregate_backward(const at::Tensor& dagg, const at::Tensor& x, int64_t H) const {
  const int64_t n = dagg.size(0), Z = x.size(0);
#if FLASHMACE_CUDA_KERNELS
  if (dagg.is_cuda() && backward_kernel_) {
    at::Tensor dS = zero_unread_harmonics_ ? at::zeros({n, Z, H, d_.dim_sh}, dagg.options())
                                           : at::empty({n, Z, H, d_.dim_sh}, dagg.options());
    const at::Tensor gc = dagg.contiguous(), xc = x.contiguous();
    const c10::cuda::CUDAGuard guard(dagg.device());
    AT_DISPATCH_FLOATING_TYPES(dagg.scalar_type(), "first_layer_aggregate_backward", [&] {
      first_layer_aggregate_backward_cuda(device_args<scalar_t>(xc, n), gc.data_ptr<scalar_t>(),
                                          dS.data_ptr<scalar_t>(), stream_of(dagg));
    });
    return dS;
  }
#endif
  at::Tensor dS = at::zeros({n, Z, H, d_.dim_sh}, dagg.options());
  for (std::size_t q = 0; q < d_.paths.size(); ++q) {
    const ConvTPPathDescriptor& p = d_.paths[q];
    const at::Tensor dp = dagg.narrow(1, p.mid_offset, p.mul * p.d3).view({n, 1, p.mul, p.d3}).transpose(2, 3);
    const at::Tensor dg = (dp * x.narrow(1, p.x_offset, p.mul).view({1, Z, 1, p.mul})).contiguous();
    const at::Tensor dt =
        at::mm(dg.view({n * Z * p.d3, p.mul}), w_out_.narrow(1, p.w_offset, p.mul).t()).view({n, Z, p.d3, H});
    dS.narrow(3, p.y_offset, p.d2).add_(at::matmul(c_[q], dt).transpose(2, 3));  // [n, Z, d2, H] -> [n, Z, H, d2]
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
    const int Z = static_cast<int>(dS.size(1)), H = static_cast<int>(h.size(1)), J = static_cast<int>(Y.size(1));
    per_edge = h.scalar_type() == at::kFloat ? !species_outer_cuda_stages_slabs<float>(Z, H, J)
                                             : !species_outer_cuda_stages_slabs<double>(Z, H, J);
  }
#endif
  const at::Tensor edge_row =
      per_edge ? at::repeat_interleave(at::arange(nrows, rp.options()), rp.diff(), 0, E) : at::Tensor();
  at::Tensor dh = at::empty({E, h.size(1)}, h.options()), dY = at::empty_like(Yc);
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "first_layer_sums_backward", [&] {
    SpeciesOuterArgs<scalar_t> a = args<scalar_t>(hc, hi, Yc, sc, rp, dS.size(1));
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
