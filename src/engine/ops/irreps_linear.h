#pragma once
// e3nn's o3.Linear (mace_spec.md 5.1: y_o = sum over input blocks i of the same irrep of
// x_i W_io / sqrt(fan_o)) with its launches cut down for the fast engine: the 1/sqrt(fan) folded into
// the weights once; input blocks of one irrep that sit side by side (MACE sorts its irreps, so the
// tensor product's paths of one irrep are adjacent) read as one block against their stacked weights,
// so each output block is one GEMM; scalar blocks go straight from and into their column ranges
// (no copies); the others are transposed to rows of [n * (2l + 1), mul] once each way. Results can
// be written or added into a caller's tensor (a column range of it, or rows of a chunk). The
// reference path keeps model/e3nn_ops.h. Internal to the fast engine (ATen).
//
// Each side of a linear (its input and its output irreps) has a column layout (IrrepsLayout): e3nn's
// mul_ir, or ir_mul (core/irreps.h), in which a run of adjacent blocks of one irrep keeps each of its
// 2l + 1 components' channels side by side. A run read or written in ir_mul is d strided [n, mul]
// matrices, one batched GEMM over its components with no transposing copy; mul_ir blocks of l > 0
// still take one copy each.
#include <ATen/ATen.h>

#include <vector>

#include "core/irreps.h"

namespace flashmace {

// Where a block of mul copies of an irrep of dimension d = 2l + 1 keeps component m of channel u,
// among its mul * d columns: u d + m (mul_ir, e3nn's) or m mul + u (ir_mul). Scalar blocks are the
// same in both.
enum class IrrepsLayout { MulIr, IrMul };

class IrrepsLinear {
 public:
  IrrepsLinear() = default;
  // weight: e3nn's flat weight vector (model/e3nn_ops.h order) in the model's dtype and device;
  // fan_factor multiplies every fan (the element count, for one element's part of an element linear).
  IrrepsLinear(const at::Tensor& weight, const Irreps& in, const Irreps& out, int64_t fan_factor = 1);

  // The column layouts of the input and output tensors every later call passes (both mul_ir until
  // set; transpose() reads the output's layout and writes the input's). An input run of adjacent
  // blocks of one irrep is one span, in either layout; an ir_mul output needs output blocks of
  // l > 0 that are not adjacent copies of one irrep (each output block is written on its own), else
  // it throws.
  IrrepsLinear& set_layouts(IrrepsLayout in, IrrepsLayout out);

  // x [n, dim(in)] -> y [n, dim(out)]
  at::Tensor forward(const at::Tensor& x) const;
  // g [n, dim(out)] -> the x-gradient [n, dim(in)]
  at::Tensor transpose(const at::Tensor& g) const;
  // The same into `y` ([n, dim(out)] or [n, dim(in)], any row stride): written, or added to it.
  void forward_into(const at::Tensor& x, const at::Tensor& y, bool accumulate) const;
  void transpose_into(const at::Tensor& g, const at::Tensor& y, bool accumulate) const;

  int64_t in_dim() const { return in_dim_; }
  IrrepsLayout in_layout() const { return in_layout_; }
  IrrepsLayout out_layout() const { return out_layout_; }
  int64_t out_dim() const { return out_dim_; }

  // Batched linears: parts (of one irreps pair) stacked, each weight [parts, span mul, out mul].
  static IrrepsLinear stack(const std::vector<IrrepsLinear>& parts);
  // A stacked linear's parts `index` (int64, on its device): x's rows in index.size(0) equal batches,
  // batch b through part index[b] (one batched GEMM per weight for all parts).
  IrrepsLinear select(const at::Tensor& index) const;

  // The output blocks that read input columns [offset, offset + mul * d) (one block of irrep dimension
  // d): each block's columns and the weight rows of this input, [mul, out mul], scaled as forward
  // applies them. For a caller that folds the linear into its own GEMMs (first_layer.h). Unstacked
  // linears only.
  struct Reader {
    int64_t out_offset = 0, out_mul = 0;
    at::Tensor weight;
  };
  std::vector<Reader> readers(int64_t offset, int64_t mul, int64_t d) const;

 private:
  // Consecutive blocks of one irrep: columns [offset, offset + mul * d) in mul_ir layout.
  struct Span {
    int64_t offset = 0, mul = 0;
  };
  // One output block and the input spans it reads, with their scaled weights [span mul, out mul]
  // (stacked: [parts, span mul, out mul]).
  struct Term {
    Span out;
    int64_t d = 1;
    std::vector<Span> in;
    std::vector<at::Tensor> w;
  };
  std::vector<Term> terms_;
  int64_t in_dim_ = 0, out_dim_ = 0;
  IrrepsLayout in_layout_ = IrrepsLayout::MulIr, out_layout_ = IrrepsLayout::MulIr;
  bool mul_ir_only() const { return in_layout_ == IrrepsLayout::MulIr && out_layout_ == IrrepsLayout::MulIr; }
  // Term t (d > 1) by components: y's block (layout y_layout) from x's spans (x_layout) times w (or
  // w^T, transposed: from the block to the spans), as batched GEMMs over the d components.
  void components_forward(const Term& t, const at::Tensor& x, const at::Tensor& y, bool accumulate) const;
  void components_transpose(const Term& t, const at::Tensor& g, const at::Tensor& y, bool accumulate) const;
  bool transpose_writes_each_column_once_ = true;
  bool adjacent_outputs_ = false;  // adjacent output blocks of one irrep with l > 0
};

}  // namespace flashmace
