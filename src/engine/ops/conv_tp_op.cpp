#include "engine/ops/conv_tp_op.h"

#include <cstring>
#include <string>
#include <tuple>

#include "core/cpu_isa.h"
#include "core/error.h"
#include "engine/kernels/conv_tp_specialized.h"
#include "jit/nvrtc.h"

#if FLASHMACE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmace {

namespace {

constexpr std::size_t kPathInts = sizeof(ConvTPKernelPath) / sizeof(int32_t);
constexpr std::size_t kRunInts = sizeof(ConvTPKernelRun) / sizeof(int32_t);
constexpr std::size_t kTermInts = sizeof(ConvTPKernelTerm) / sizeof(int32_t);

void check_tensor(const at::Tensor& t, const char* name, at::ScalarType dtype, at::Device device, int64_t rows,
                  int64_t cols) {
  const std::string what = std::string("conv TP: tensor '") + name + "'";
  if (!t.defined()) throw Error(what + " is undefined");
  if (t.scalar_type() != dtype)
    throw Error(what + " has dtype " + std::string(c10::toString(t.scalar_type())) + ", expected " +
                c10::toString(dtype));
  if (t.device() != device) throw Error(what + " is on " + t.device().str() + ", expected " + device.str());
  const bool shape_ok =
      cols < 0 ? t.dim() == 1 && t.size(0) == rows : t.dim() == 2 && t.size(0) == rows && t.size(1) == cols;
  if (!shape_ok)
    throw Error(what + " has shape " + c10::str(t.sizes()) + ", expected [" + std::to_string(rows) +
                (cols < 0 ? "" : ", " + std::to_string(cols)) + "]");
}

template <typename T>
ConvTPEdges<T> edges(const at::Tensor& x, const at::Tensor& xindex, const at::Tensor& Y, const at::Tensor& R,
                     const at::Tensor& radial_index, const at::Tensor& row_ptr, int64_t nrows) {
  ConvTPEdges<T> g;
  g.x = x.data_ptr<T>();
  g.num_x = x.size(0);
  g.xindex = xindex.data_ptr<int64_t>();
  g.Y = Y.data_ptr<T>();
  g.R = R.data_ptr<T>();
  g.num_radial = R.size(0);
  if (radial_index.defined()) g.radial_index = radial_index.data_ptr<int64_t>();
  g.row_ptr = row_ptr.data_ptr<int64_t>();
  g.nrows = nrows;
  g.num_edges = Y.size(0);
  return g;
}

// Shapes and devices of the forward inputs; returns them contiguous.
struct Inputs {
  at::Tensor x, xindex, Y, R, radial_index, row_ptr;
};
Inputs check_inputs(const ConvTPOp& op, const at::Tensor& x_table, const at::Tensor& xindex, const at::Tensor& Y,
                    const at::Tensor& R, const at::Tensor& radial_index, const at::Tensor& row_ptr, int64_t nrows) {
  const ConvTPDescriptor& d = op.descriptor();
  const int64_t E = Y.defined() ? Y.size(0) : 0;
  check_tensor(x_table, "x_table", op.dtype(), op.device(), x_table.defined() ? x_table.size(0) : 0, d.dim_in1);
  check_tensor(xindex, "xindex", at::kLong, op.device(), E, -1);
  check_tensor(Y, "Y", op.dtype(), op.device(), E, d.dim_sh);
  if (radial_index.defined()) {
    check_tensor(radial_index, "radial_index", at::kLong, op.device(), E, -1);
    check_tensor(R, "R", op.dtype(), op.device(), R.defined() ? R.size(0) : 0, d.weight_numel);
  } else {
    check_tensor(R, "R", op.dtype(), op.device(), E, d.weight_numel);
  }
  check_tensor(row_ptr, "row_ptr", at::kLong, op.device(), nrows + 1, -1);
  if (op.device().is_cpu()) {  // on a GPU this check would cost a synchronisation
    const int64_t* rp = row_ptr.contiguous().data_ptr<int64_t>();
    if (rp[0] != 0 || rp[nrows] != E)
      throw Error("conv TP: row_ptr must run from 0 to the number of edges " + std::to_string(E) + ", got " +
                  std::to_string(rp[0]) + " .. " + std::to_string(rp[nrows]));
  }
  return {x_table.contiguous(),
          xindex.contiguous(),
          Y.contiguous(),
          R.contiguous(),
          radial_index.defined() ? radial_index.contiguous() : at::Tensor(),
          row_ptr.contiguous()};
}

#if FLASHMACE_CUDA_KERNELS
void* current_stream(at::Device device) { return c10::cuda::getCurrentCUDAStream(device.index()).stream(); }
#endif

#if !FLASHMACE_CUDA_KERNELS
[[noreturn]] void no_cuda() {
  throw Error(
      "conv TP: CUDA tensors given, but flashmace was built without its CUDA kernels "
      "(FLASHMACE_CUDA_KERNELS); reconfigure on a machine with nvcc, or use the CPU");
}
#endif

// ir_mul descriptors run only on the generated kernels (the table-driven ones read mul_ir).
void check_layout_runs(const ConvTPOp& op, const ConvTPSpecialized* spec) {
  if (op.descriptor().ir_mul && !spec)
    throw Error("conv TP: an ir_mul descriptor runs only on the specialised CUDA kernels (" + op.executor() + " here)");
}

}  // namespace

ConvTPOp::ConvTPOp(const ConvTPDescriptor& desc, const at::TensorOptions& options, bool specialize)
    : desc_(desc), packed_(pack_conv_tp(desc)) {
  const at::ScalarType dtype = options.dtype().toScalarType();
  if (dtype != at::kFloat && dtype != at::kDouble)
    throw Error("conv TP: dtype " + std::string(c10::toString(dtype)) + " is not supported; use float32 or float64");
  const std::size_t n =
      packed_.paths.size() * kPathInts + packed_.runs.size() * kRunInts + packed_.terms.size() * kTermInts;
  at::Tensor ints = at::empty({static_cast<int64_t>(n)}, at::TensorOptions().dtype(at::kInt));
  auto* p = reinterpret_cast<char*>(ints.data_ptr<int32_t>());
  std::memcpy(p, packed_.paths.data(), packed_.paths.size() * sizeof(ConvTPKernelPath));
  p += packed_.paths.size() * sizeof(ConvTPKernelPath);
  std::memcpy(p, packed_.runs.data(), packed_.runs.size() * sizeof(ConvTPKernelRun));
  p += packed_.runs.size() * sizeof(ConvTPKernelRun);
  std::memcpy(p, packed_.terms.data(), packed_.terms.size() * sizeof(ConvTPKernelTerm));
  ints_ = ints.to(options.device());
  coeff_ = at::tensor(packed_.coeff, at::TensorOptions().dtype(at::kDouble)).to(options.device(), dtype);
#if FLASHMACE_CUDA_KERNELS
  if (specialize && options.device().is_cuda()) {
    const c10::cuda::CUDAGuard guard(options.device());
    std::string why;
    specialized_ = ConvTPSpecialized::create(desc_, &why);
    if (!specialized_)
      jit_log_once("specialised conv TP kernels not available (" + why + "); using the table-driven CUDA kernels");
  }
#else
  (void)specialize;
#endif
}

std::string ConvTPOp::executor() const {
  if (device().is_cpu()) return std::string("cpu ") + cpu_isa_name(cpu_isa());
  return specialized_ ? "specialized " + specialized_->arch() : "generic cuda";
}

template <typename T>
ConvTPTables<T> ConvTPOp::tables() const {
  ConvTPTables<T> t;
  const int32_t* base = ints_.data_ptr<int32_t>();
  t.paths = reinterpret_cast<const ConvTPKernelPath*>(base);
  t.runs = reinterpret_cast<const ConvTPKernelRun*>(base + packed_.paths.size() * kPathInts);
  t.terms = reinterpret_cast<const ConvTPKernelTerm*>(base + packed_.paths.size() * kPathInts +
                                                      packed_.runs.size() * kRunInts);
  t.coeff = coeff_.data_ptr<T>();
  t.num_paths = static_cast<int>(packed_.paths.size());
  t.dim_in1 = packed_.dim_in1;
  t.dim_sh = packed_.dim_sh;
  t.dim_mid = packed_.dim_mid;
  t.weight_numel = packed_.weight_numel;
  t.max_mul = packed_.max_mul;
  return t;
}
template ConvTPTables<float> ConvTPOp::tables<float>() const;
template ConvTPTables<double> ConvTPOp::tables<double>() const;

XIndexCsr xindex_csr(const at::Tensor& xindex, int64_t num_x) {
  XIndexCsr c;
  c.perm = std::get<1>(at::sort(xindex, /*stable=*/std::optional<bool>(true), /*dim=*/0, /*descending=*/false));
  const at::Tensor counts = at::bincount(xindex, {}, num_x);
  c.ptr = at::cat({at::zeros({1}, xindex.options()), at::cumsum(counts, 0)});
  return c;
}

XIndexCsr xindex_csr_compact(const at::Tensor& xindex) {
  XIndexCsr c;
  const auto sorted = at::sort(xindex, /*stable=*/std::optional<bool>(true), /*dim=*/0, /*descending=*/false);
  c.perm = std::get<1>(sorted);
  at::Tensor counts;
  std::tie(c.rows, std::ignore, counts) =
      at::unique_consecutive(std::get<0>(sorted), /*return_inverse=*/false, /*return_counts=*/true);
  c.ptr = at::cat({at::zeros({1}, xindex.options()), at::cumsum(counts, 0)});
  return c;
}

at::Tensor conv_tp_aggregate(const ConvTPOp& op, const at::Tensor& x_table, const at::Tensor& xindex,
                             const at::Tensor& Y, const at::Tensor& R, const at::Tensor& row_ptr, int64_t nrows,
                             const at::Tensor& radial_index) {
  const Inputs in = check_inputs(op, x_table, xindex, Y, R, radial_index, row_ptr, nrows);
  at::Tensor agg = at::empty({nrows, op.descriptor().dim_mid}, in.Y.options());
  const ConvTPSpecialized* spec = op.device().is_cuda() ? op.specialized() : nullptr;
  check_layout_runs(op, spec);
  const int64_t scratch = spec ? spec->forward_scratch(nrows) : 0;
  const at::Tensor part = scratch > 0 ? at::empty({scratch}, in.Y.options().dtype(at::kDouble)) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(op.dtype(), "conv_tp_aggregate", [&] {
    const ConvTPEdges<scalar_t> g = edges<scalar_t>(in.x, in.xindex, in.Y, in.R, in.radial_index, in.row_ptr, nrows);
    if (op.device().is_cpu()) {
      conv_tp_forward_cpu(op.tables<scalar_t>(), g, agg.data_ptr<scalar_t>());
    } else {
#if FLASHMACE_CUDA_KERNELS
      const c10::cuda::CUDAGuard guard(op.device());
      if (spec)
        spec->forward(g, agg.data_ptr<scalar_t>(), part.defined() ? part.data_ptr<double>() : nullptr,
                      current_stream(op.device()));
      else
        conv_tp_forward_cuda(op.tables<scalar_t>(), g, agg.data_ptr<scalar_t>(), current_stream(op.device()));
#else
      no_cuda();
#endif
    }
  });
  return agg;
}

ConvTPEdgeGrads conv_tp_aggregate_backward(const ConvTPOp& op, const at::Tensor& dagg, const at::Tensor& x_table,
                                           const at::Tensor& xindex, const at::Tensor& Y, const at::Tensor& R,
                                           const at::Tensor& row_ptr, at::Tensor dx, const XIndexCsr& x_csr,
                                           const at::Tensor& radial_index, bool sum_dR_per_radial_row,
                                           const at::Tensor& dR_rows) {
  const int64_t nrows = dagg.defined() ? dagg.size(0) : 0;
  const Inputs in = check_inputs(op, x_table, xindex, Y, R, radial_index, row_ptr, nrows);
  const ConvTPDescriptor& d = op.descriptor();
  check_tensor(dagg, "dagg", op.dtype(), op.device(), nrows, d.dim_mid);
  const at::Tensor g_agg = dagg.contiguous();
  const int64_t E = in.Y.size(0), X = in.x.size(0);
  if (dx.defined()) {
    check_tensor(dx, "dx", op.dtype(), op.device(), X, d.dim_in1);
    if (!dx.is_contiguous()) throw Error("conv TP: tensor 'dx' must be contiguous (it is accumulated in place)");
    check_tensor(x_csr.perm, "x_csr.perm", at::kLong, op.device(), E, -1);
    if (x_csr.rows.defined()) check_tensor(x_csr.rows, "x_csr.rows", at::kLong, op.device(), x_csr.rows.size(0), -1);
    const int64_t csr_rows = x_csr.rows.defined() ? x_csr.rows.size(0) : X;
    check_tensor(x_csr.ptr, "x_csr.ptr", at::kLong, op.device(), csr_rows + 1, -1);
  }
  const at::Tensor x_perm = dx.defined() ? x_csr.perm.contiguous() : at::Tensor();
  const at::Tensor x_ptr = dx.defined() ? x_csr.ptr.contiguous() : at::Tensor();
  const at::Tensor x_rows = dx.defined() && x_csr.rows.defined() ? x_csr.rows.contiguous() : at::Tensor();
  ConvTPEdgeGrads out;
  const ConvTPSpecialized* spec = op.device().is_cuda() ? op.specialized() : nullptr;
  check_layout_runs(op, spec);
  const bool by_row = sum_dR_per_radial_row && in.radial_index.defined();
  // The specialised CUDA kernels and the CPU kernels add each edge's dR into its row; the generic CUDA
  // kernels write per edge, summed below.
  const bool kernel_by_row = by_row && (spec || op.device().is_cpu());
  if (kernel_by_row && dR_rows.defined()) check_tensor(dR_rows, "dR_rows", op.dtype(), op.device(), in.R.size(0), d.weight_numel);
  // (the CPU kernels write every row of dR; the specialised CUDA ones add into zeros)
  out.dR = !kernel_by_row              ? at::empty({E, d.weight_numel}, in.Y.options())
           : dR_rows.defined()         ? dR_rows
           : op.device().is_cpu()      ? at::empty({in.R.size(0), d.weight_numel}, in.Y.options())
                                       : at::zeros({in.R.size(0), d.weight_numel}, in.Y.options());
  out.dY = at::empty({E, d.dim_sh}, in.Y.options());
  // Each edge's row, for the generic CUDA kernels that start from an edge (no search through row_ptr;
  // the CPU kernels fill it themselves); the specialised ones start from rows and need scratch for
  // partial dY and per-edge dx instead.
  const at::Tensor edge_row =
      spec || op.device().is_cpu()
          ? at::Tensor()
          : at::repeat_interleave(at::arange(nrows, in.row_ptr.options()), in.row_ptr.diff(), 0, E);
  const at::Tensor dy_scratch = spec ? at::empty({E, spec->dy_scratch_columns()}, in.Y.options()) : at::Tensor();
  const at::Tensor dx_scratch =
      spec && dx.defined() ? at::empty({E, spec->dx_scratch_columns()}, in.Y.options()) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(op.dtype(), "conv_tp_aggregate_backward", [&] {
    ConvTPEdges<scalar_t> g = edges<scalar_t>(in.x, in.xindex, in.Y, in.R, in.radial_index, in.row_ptr, nrows);
    if (edge_row.defined()) g.edge_row = edge_row.data_ptr<int64_t>();
    ConvTPGradients<scalar_t> grads;
    grads.dagg = g_agg.data_ptr<scalar_t>();
    grads.dR = out.dR.data_ptr<scalar_t>();
    grads.dR_by_radial_row = kernel_by_row;
    grads.dY = out.dY.data_ptr<scalar_t>();
    if (dx.defined()) {
      grads.dx = dx.data_ptr<scalar_t>();
      grads.x_perm = x_perm.data_ptr<int64_t>();
      grads.x_ptr = x_ptr.data_ptr<int64_t>();
      grads.x_rows = x_rows.defined() ? x_rows.data_ptr<int64_t>() : nullptr;
      grads.num_x_rows = x_ptr.size(0) - 1;
    }
    if (op.device().is_cpu()) {
      at::Tensor waiting;  // (from LibTorch's allocator: the CPU buffer cache reuses it between steps)
      grads.waiting_rows = [&](int64_t n) {
        waiting = at::empty({n}, in.Y.options());
        return waiting.data_ptr<scalar_t>();
      };
      conv_tp_backward_cpu(op.tables<scalar_t>(), g, grads);
    } else {
#if FLASHMACE_CUDA_KERNELS
      const c10::cuda::CUDAGuard guard(op.device());
      if (spec)
        spec->backward(g, grads, dy_scratch.data_ptr<scalar_t>(),
                       dx_scratch.defined() ? dx_scratch.data_ptr<scalar_t>() : nullptr, current_stream(op.device()));
      else
        conv_tp_backward_cuda(op.tables<scalar_t>(), g, grads, current_stream(op.device()));
#else
      no_cuda();
#endif
    }
  });
  // (index_add_ adds in edge order on the CPU and atomically on CUDA: with at most two edges per row
  // both give 0 + a + b exactly)
  if (by_row && !kernel_by_row)
    out.dR = at::zeros({in.R.size(0), d.weight_numel}, out.dR.options()).index_add_(0, in.radial_index, out.dR);
  return out;
}

at::Tensor conv_tp_dR_rows(const ConvTPOp& op, const at::Tensor& R, bool sum_dR_per_radial_row) {
  if (!sum_dR_per_radial_row || !op.specialized()) return {};
  return at::zeros({R.size(0), op.descriptor().weight_numel}, R.options());
}

}  // namespace flashmace
