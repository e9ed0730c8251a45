#pragma once
// ATen entry points of the fused conv TP message kernels (conv_tp_kernels.h): the receiver-summed
// messages agg[row] = sum_{e in row} TP(x[xindex[e]], Y[e], R[e]) (mace_spec.md 5.2) and their
// gradients, on the CPU or, when built with FLASHMACE_CUDA_KERNELS, on CUDA (the tensors' device,
// LibTorch's current stream). No autograd: callers run the backward explicitly.
#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "engine/kernels/conv_tp_descriptor.h"
#include "engine/kernels/conv_tp_kernels.h"

namespace flashmace {

class ConvTPSpecialized;

// A descriptor's kernel tables in one dtype (float32 or float64) on one device; built once per model.
// On CUDA, with `specialize`, the layer's kernels are also generated and compiled for this model
// (conv_tp_specialized.h) and run instead of the table-driven ones; when that is not possible the
// reason is logged once and the table-driven kernels run.
class ConvTPOp {
 public:
  ConvTPOp(const ConvTPDescriptor& desc, const at::TensorOptions& options, bool specialize = true);
  const ConvTPDescriptor& descriptor() const { return desc_; }
  const ConvTPSpecialized* specialized() const { return specialized_.get(); }
  std::string executor() const;  // "cpu avx512" (the instruction set), "generic cuda" or "specialized sm_XY"
  at::ScalarType dtype() const { return coeff_.scalar_type(); }
  at::Device device() const { return coeff_.device(); }
  template <typename T>
  ConvTPTables<T> tables() const;

 private:
  ConvTPDescriptor desc_;
  ConvTPPacked packed_;  // host copy: sizes and offsets
  at::Tensor ints_;      // paths, runs, terms as int32, on the device
  at::Tensor coeff_;     // [terms] in the dtype, on the device
  std::shared_ptr<const ConvTPSpecialized> specialized_;
};

// The edges sorted by xindex, for the dx pass: perm [E] (stable) and ptr [rows + 1] over every x row
// (rows undefined; ptr [num_x + 1]) or over the x rows the edges use (rows [R], ascending).
struct XIndexCsr {
  at::Tensor perm, ptr, rows;
};
XIndexCsr xindex_csr(const at::Tensor& xindex, int64_t num_x);
// Over the x rows the edges use: its size follows the edges, not the table (an edge chunk of a large
// system touches few of its atoms). One device->host copy of the row count.
XIndexCsr xindex_csr_compact(const at::Tensor& xindex);

// x_table [X, dim(in1)], xindex [E] int64, Y [E, dim(sh)], R [E, weight_numel], row_ptr [nrows + 1]
// int64 with row_ptr[0] = 0 and row_ptr[nrows] = E (edges sorted by receiver). Returns agg
// [nrows, dim(mid)]. Float tensors in the op's dtype and on its device. With radial_index ([E]
// int64, rows of R), R is [any, weight_numel] and edge e uses row radial_index[e].
at::Tensor conv_tp_aggregate(const ConvTPOp& op, const at::Tensor& x_table, const at::Tensor& xindex,
                             const at::Tensor& Y, const at::Tensor& R, const at::Tensor& row_ptr, int64_t nrows,
                             const at::Tensor& radial_index = {});

struct ConvTPEdgeGrads {
  at::Tensor dR;  // [E, weight_numel], or [R rows, weight_numel] (summed per radial row)
  at::Tensor dY;  // [E, dim(sh)]
};
// Gradients for dagg [nrows, dim(mid)]. When dx is defined ([X, dim(in1)], contiguous) the x-table
// gradient is added to it; x_csr must then be xindex_csr(xindex, X) or xindex_csr_compact(xindex). dR is per edge ([E,
// weight_numel]), also with a radial index, unless sum_dR_per_radial_row: then it is per row of R,
// the sum over the edges sharing that row, which must be at most two per row (reverse-edge pairs:
// the sum is then exact and deterministic on every device). dR_rows: what conv_tp_dR_rows gave for
// the same R, if the caller made it ahead (its zeros cleared on another stream, say).
ConvTPEdgeGrads conv_tp_aggregate_backward(const ConvTPOp& op, const at::Tensor& dagg, const at::Tensor& x_table,
                                           const at::Tensor& xindex, const at::Tensor& Y, const at::Tensor& R,
                                           const at::Tensor& row_ptr, at::Tensor dx = {},
                                           const XIndexCsr& x_csr = {}, const at::Tensor& radial_index = {},
                                           bool sum_dR_per_radial_row = false, const at::Tensor& dR_rows = {});

// Where the kernels sum dR per radial row in place (the specialised CUDA kernels with
// sum_dR_per_radial_row and a radial index): the zeroed [R rows, weight_numel] they add into.
// Undefined otherwise (dR is then written, not accumulated).
at::Tensor conv_tp_dR_rows(const ConvTPOp& op, const at::Tensor& R, bool sum_dR_per_radial_row);

}  // namespace flashmace
