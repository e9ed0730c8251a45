#include "engine/ops/irreps_linear.h"

#include <cmath>

#include "core/error.h"

namespace flashmace {

namespace {

// Columns [offset, offset + mul * d) of t [n, *] (mul_ir layout) as rows [n * d, mul]: a strided
// view for scalars, one transposing copy otherwise.
at::Tensor rows_of(const at::Tensor& t, int64_t offset, int64_t mul, int64_t d) {
  const at::Tensor cols = t.narrow(1, offset, mul * d);
  if (d == 1) return cols;
  return cols.reshape({t.size(0), mul, d}).transpose(1, 2).contiguous().view({t.size(0) * d, mul});
}

// rows [n * d, mul] (d > 1) back into columns [offset, offset + mul * d) of y, written or added.
void place(const at::Tensor& y, int64_t offset, int64_t mul, int64_t d, const at::Tensor& rows, bool accumulate) {
  const int64_t n = y.size(0);
  const at::Tensor target3 = y.narrow(1, offset, mul * d).view({n, mul, d});
  const at::Tensor source3 = rows.view({n, d, mul}).transpose(1, 2);
  if (accumulate)
    target3.add_(source3);
  else
    target3.copy_(source3);
}

// Columns [offset, offset + mul * d) of t [n, *] as its d components [d, n, mul]: a strided view in
// ir_mul; a copy in mul_ir (d > 1).
at::Tensor components_of(const at::Tensor& t, int64_t offset, int64_t mul, int64_t d, IrrepsLayout layout) {
  const int64_t n = t.size(0);
  const at::Tensor cols = t.narrow(1, offset, mul * d);
  if (layout == IrrepsLayout::IrMul) return cols.view({n, d, mul}).transpose(0, 1);
  return cols.view({n, mul, d}).permute({2, 0, 1}).contiguous();
}

// Columns [offset, offset + mul * d) of y in ir_mul as the view [d, n, mul] that a batched GEMM
// writes the block's components into.
at::Tensor components_target(const at::Tensor& y, int64_t offset, int64_t mul, int64_t d) {
  return y.narrow(1, offset, mul * d).view({y.size(0), d, mul}).transpose(0, 1);
}

// r [d, n, mul] (components) into mul_ir columns [offset, offset + mul * d) of y, written or added:
// one transposing copy.
void place_components(const at::Tensor& y, int64_t offset, int64_t mul, int64_t d, const at::Tensor& r,
                      bool accumulate) {
  const at::Tensor target3 = y.narrow(1, offset, mul * d).view({y.size(0), mul, d});
  const at::Tensor source3 = r.permute({1, 2, 0});
  if (accumulate)
    target3.add_(source3);
  else
    target3.copy_(source3);
}

// a [d, n, k] times w [k, m] (the same for every component) into out [d, n, m] (any strides with a
// unit last one), written or added.
void components_product_into(const at::Tensor& a, const at::Tensor& w, const at::Tensor& out, bool accumulate) {
  const at::Tensor w3 = w.unsqueeze(0).expand({a.size(0), w.size(0), w.size(1)});
  if (accumulate) {
    out.baddbmm_(a, w3);
  } else {
    at::Tensor o = out;
    at::bmm_out(o, a, w3);
  }
}

// t [rows, k] as B equal batches of rows [B, rows / B, k]
at::Tensor batch_view(const at::Tensor& t, int64_t B) { return t.view({B, t.size(0) / B, t.size(1)}); }

// a [rows, k] times w ([k, m]; or [B, k, m], batch b of rows times w[b]), or times w^T: a new tensor,
// or written or added into out [rows, m] (any row stride).
at::Tensor product(const at::Tensor& a, const at::Tensor& w, bool transposed) {
  if (w.dim() == 2) return at::mm(a, transposed ? w.t() : w);
  const int64_t B = w.size(0);
  return at::bmm(batch_view(a, B), transposed ? w.transpose(1, 2) : w).view({a.size(0), -1});
}

void product_into(const at::Tensor& a, const at::Tensor& w, bool transposed, const at::Tensor& out, bool accumulate) {
  if (w.dim() == 2) {
    const at::Tensor wt = transposed ? w.t() : w;
    if (accumulate)
      out.addmm_(a, wt);
    else
      at::mm_out(const_cast<at::Tensor&>(out), a, wt);
    return;
  }
  const int64_t B = w.size(0);
  at::Tensor out3 = batch_view(out, B);
  const at::Tensor wt = transposed ? w.transpose(1, 2) : w;
  if (accumulate)
    out3.baddbmm_(batch_view(a, B), wt);
  else
    at::bmm_out(out3, batch_view(a, B), wt);
}

}  // namespace

IrrepsLinear& IrrepsLinear::set_layouts(IrrepsLayout in, IrrepsLayout out) {
  if (out == IrrepsLayout::IrMul && adjacent_outputs_)
    throw Error("irreps linear: an ir_mul output with adjacent blocks of one irrep (l > 0), which it writes apart");
  in_layout_ = in;
  out_layout_ = out;
  return *this;
}

void IrrepsLinear::components_forward(const Term& t, const at::Tensor& x, const at::Tensor& y, bool accumulate) const {
  const bool direct = out_layout_ == IrrepsLayout::IrMul;
  const at::Tensor target = direct ? components_target(y, t.out.offset, t.out.mul, t.d) : at::Tensor();
  at::Tensor r;
  for (std::size_t k = 0; k < t.in.size(); ++k) {
    const at::Tensor xk = components_of(x, t.in[k].offset, t.in[k].mul, t.d, in_layout_);
    if (t.w[k].dim() == 3) {  // stacked: x's rows in equal batches, batch b through w[k][b], per component
      const int64_t B = t.w[k].size(0);
      if (!r.defined()) r = direct ? target : at::empty({t.d, x.size(0), t.out.mul}, x.options());
      for (int64_t m = 0; m < t.d; ++m) {
        at::Tensor out3 = batch_view(r[m], B);
        if ((accumulate && direct) || k > 0)
          out3.baddbmm_(batch_view(xk[m], B), t.w[k]);
        else
          at::bmm_out(out3, batch_view(xk[m], B), t.w[k]);
      }
      continue;
    }
    if (direct) {
      components_product_into(xk, t.w[k], target, accumulate || k > 0);
    } else if (k == 0) {
      r = at::empty({t.d, x.size(0), t.out.mul}, x.options());
      components_product_into(xk, t.w[k], r, false);
    } else {
      components_product_into(xk, t.w[k], r, true);
    }
  }
  if (!direct) place_components(y, t.out.offset, t.out.mul, t.d, r, accumulate);
}

void IrrepsLinear::components_transpose(const Term& t, const at::Tensor& g, const at::Tensor& y,
                                        bool accumulate) const {
  const at::Tensor gt = components_of(g, t.out.offset, t.out.mul, t.d, out_layout_);
  const bool direct = in_layout_ == IrrepsLayout::IrMul;
  for (std::size_t k = 0; k < t.in.size(); ++k) {
    const Span& s = t.in[k];
    const at::Tensor r =
        direct ? components_target(y, s.offset, s.mul, t.d) : at::empty({t.d, g.size(0), s.mul}, g.options());
    const bool add = direct && accumulate;
    if (t.w[k].dim() == 3) {
      const int64_t B = t.w[k].size(0);
      for (int64_t m = 0; m < t.d; ++m) {
        at::Tensor out3 = batch_view(r[m], B);
        if (add)
          out3.baddbmm_(batch_view(gt[m], B), t.w[k].transpose(1, 2));
        else
          at::bmm_out(out3, batch_view(gt[m], B), t.w[k].transpose(1, 2));
      }
    } else {
      components_product_into(gt, t.w[k].t(), r, add);
    }
    if (!direct) place_components(y, s.offset, s.mul, t.d, r, accumulate);
  }
}

IrrepsLinear IrrepsLinear::stack(const std::vector<IrrepsLinear>& parts) {
  if (parts.empty()) throw Error("irreps linear: nothing to stack");
  IrrepsLinear s = parts.front();
  for (std::size_t t = 0; t < s.terms_.size(); ++t)
    for (std::size_t k = 0; k < s.terms_[t].w.size(); ++k) {
      std::vector<at::Tensor> w;
      for (const IrrepsLinear& p : parts) w.push_back(p.terms_[t].w[k]);
      s.terms_[t].w[k] = at::stack(w);
    }
  return s;
}

IrrepsLinear IrrepsLinear::select(const at::Tensor& index) const {
  IrrepsLinear s = *this;
  for (Term& t : s.terms_)
    for (at::Tensor& w : t.w) {
      if (w.dim() != 3) throw Error("irreps linear: select needs a stacked linear");
      w = w.index_select(0, index);
    }
  return s;
}

std::vector<IrrepsLinear::Reader> IrrepsLinear::readers(int64_t offset, int64_t mul, int64_t d) const {
  std::vector<Reader> found;
  for (const Term& t : terms_) {
    if (t.d != d) continue;
    for (std::size_t k = 0; k < t.in.size(); ++k) {
      const Span& s = t.in[k];
      if (offset < s.offset || offset + mul * d > s.offset + s.mul * d || (offset - s.offset) % d != 0) continue;
      if (t.w[k].dim() != 2) throw Error("irreps linear: readers of a stacked linear");
      found.push_back({t.out.offset, t.out.mul, t.w[k].narrow(0, (offset - s.offset) / d, mul)});
    }
  }
  return found;
}

IrrepsLinear::IrrepsLinear(const at::Tensor& weight, const Irreps& in, const Irreps& out, int64_t fan_factor)
    : in_dim_(in.dim()), out_dim_(out.dim()) {
  std::vector<int64_t> in_offset, out_offset;
  for (int64_t o = 0, i = 0; i < static_cast<int64_t>(in.size()); ++i) {
    in_offset.push_back(o);
    o += in[i].dim();
  }
  for (int64_t o = 0, i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    out_offset.push_back(o);
    o += out[i].dim();
  }
  // Weight offsets in e3nn's order (input blocks outer, matching output blocks inner).
  std::vector<std::vector<int64_t>> woff(in.size(), std::vector<int64_t>(out.size(), -1));
  int64_t offset = 0;
  for (std::size_t i = 0; i < in.size(); ++i)
    for (std::size_t o = 0; o < out.size(); ++o)
      if (in[i].ir == out[o].ir) {
        woff[i][o] = offset;
        offset += static_cast<int64_t>(in[i].mul) * out[o].mul;
      }
  if (offset != weight.numel())
    throw Error("irreps linear: " + std::to_string(weight.numel()) + " weights for " + in.str() + " -> " + out.str() +
                ", which needs " + std::to_string(offset));

  adjacent_outputs_ = ir_mul_runs_span_blocks(out);
  for (std::size_t o = 0; o < out.size(); ++o) {
    Term term;
    term.out = {out_offset[o], out[o].mul};
    term.d = out[o].ir.dim();
    int64_t fan = 0;
    for (std::size_t i = 0; i < in.size(); ++i)
      if (woff[i][o] >= 0) fan += in[i].mul * fan_factor;
    const double scale = fan > 0 ? 1.0 / std::sqrt(static_cast<double>(fan)) : 0.0;
    // Adjacent matching input blocks make one span with their weights stacked.
    std::vector<at::Tensor> pieces;
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (woff[i][o] < 0) continue;
      const bool extends = !term.in.empty() && term.in.back().offset + term.in.back().mul * term.d == in_offset[i];
      if (!extends) {
        if (!pieces.empty()) term.w.push_back(at::cat(pieces, 0) * scale);
        pieces.clear();
        term.in.push_back({in_offset[i], 0});
      }
      term.in.back().mul += in[i].mul;
      pieces.push_back(weight.narrow(0, woff[i][o], static_cast<int64_t>(in[i].mul) * out[o].mul)
                           .reshape({in[i].mul, out[o].mul}));
    }
    if (!pieces.empty()) term.w.push_back(at::cat(pieces, 0) * scale);
    terms_.push_back(std::move(term));
  }
  // Whether the x-gradient writes every input column exactly once (else transpose_into zeroes first).
  std::vector<int> reads(static_cast<std::size_t>(in_dim_), 0);
  for (const Term& t : terms_)
    for (const Span& s : t.in)
      for (int64_t c = s.offset; c < s.offset + s.mul * t.d; ++c) ++reads[static_cast<std::size_t>(c)];
  transpose_writes_each_column_once_ = true;
  for (int r : reads) transpose_writes_each_column_once_ = transpose_writes_each_column_once_ && r == 1;
}

void IrrepsLinear::forward_into(const at::Tensor& x, const at::Tensor& y, bool accumulate) const {
  if (x.size(1) != in_dim_ || y.size(1) != out_dim_ || x.size(0) != y.size(0))
    throw Error("irreps linear: shapes do not match the irreps");
  if (x.size(0) == 0) return;
  for (const Term& t : terms_) {
    if (t.in.empty()) {
      if (!accumulate) y.narrow(1, t.out.offset, t.out.mul * t.d).zero_();
      continue;
    }
    if (t.d == 1) {  // scalars: the GEMMs write or add into the column range themselves
      const at::Tensor target = y.narrow(1, t.out.offset, t.out.mul);
      for (std::size_t k = 0; k < t.in.size(); ++k)
        product_into(rows_of(x, t.in[k].offset, t.in[k].mul, 1), t.w[k], false, target, accumulate || k > 0);
      continue;
    }
    if (!mul_ir_only()) {
      components_forward(t, x, y, accumulate);
      continue;
    }
    const at::Tensor r = product(rows_of(x, t.in[0].offset, t.in[0].mul, t.d), t.w[0], false);
    for (std::size_t k = 1; k < t.in.size(); ++k)
      product_into(rows_of(x, t.in[k].offset, t.in[k].mul, t.d), t.w[k], false, r, true);
    place(y, t.out.offset, t.out.mul, t.d, r, accumulate);
  }
}

void IrrepsLinear::transpose_into(const at::Tensor& g, const at::Tensor& y, bool accumulate) const {
  if (g.size(1) != out_dim_ || y.size(1) != in_dim_ || g.size(0) != y.size(0))
    throw Error("irreps linear: shapes do not match the irreps");
  if (g.size(0) == 0) return;
  // Input columns no output reads get zeros; a span read by several outputs sums their gradients.
  if (!accumulate && !transpose_writes_each_column_once_) {
    y.zero_();
    accumulate = true;
  }
  for (const Term& t : terms_) {
    if (t.in.empty()) continue;
    if (t.d > 1 && !mul_ir_only()) {
      components_transpose(t, g, y, accumulate);
      continue;
    }
    const at::Tensor rows = rows_of(g, t.out.offset, t.out.mul, t.d);
    for (std::size_t k = 0; k < t.in.size(); ++k) {
      const Span& s = t.in[k];
      if (t.d == 1)
        product_into(rows, t.w[k], true, y.narrow(1, s.offset, s.mul), accumulate);
      else
        place(y, s.offset, s.mul, t.d, product(rows, t.w[k], true), accumulate);
    }
  }
}

at::Tensor IrrepsLinear::forward(const at::Tensor& x) const {
  at::Tensor y = at::empty({x.size(0), out_dim_}, x.options());
  forward_into(x, y, /*accumulate=*/false);
  return y;
}

at::Tensor IrrepsLinear::transpose(const at::Tensor& g) const {
  at::Tensor y = at::empty({g.size(0), in_dim_}, g.options());
  transpose_into(g, y, /*accumulate=*/false);
  return y;
}

}  // namespace flashmace
