#include "engine/step/message_stage.h"

#include <tuple>

#include "core/error.h"
#include "model/stage_timer.h"

namespace flashmace {

at::Tensor segment_sum(const at::Tensor& values, const at::Tensor& row_ptr) {
  const at::Tensor lengths = row_ptr.diff();
  return at::segment_reduce(values, "sum", lengths, {}, {}, 0, /*unsafe=*/true, at::Scalar(0));
}

namespace {

void lap(StageTimer* timer, const char* stage) {
  if (timer) timer->lap(stage);
}

at::Tensor radial_index(const MessageChunkInput& in) { return in.pairs ? in.pairs->index : at::Tensor(); }

}  // namespace

at::Tensor row_pointer(const at::Tensor& rows, int64_t nrows) {
  const at::Tensor counts = at::bincount(rows, {}, nrows);
  return at::cat({at::zeros({1}, counts.options()), at::cumsum(counts, 0)});
}

void message_chunk_prepare(const EdgeGeometryOp& geometry, const MessageLayer& layer, const MessageChunkInput& in,
                           MessageChunkState* s, StageTimer* timer) {
  s->prepared = true;
  if (!s->geometry.ef.defined()) s->geometry = geometry.forward(in.vectors, in.z_sender, in.z_receiver);
  lap(timer, "edge_geometry");
  if (layer.nonlinear) {
    const Tf32Scope tf32(layer.tf32);
    std::tie(s->radial, s->density) = layer.nonlinear->forward(s->geometry.ef, in.species_sender, in.species_receiver,
                                                               in.vectors, &s->nonlinear);
    lap(timer, "radial_mlp");
    return;
  }
  if (layer.spline) {
    const at::Tensor rows = in.pairs ? in.pairs->first : at::Tensor();
    (layer.first ? s->hidden : s->radial) = layer.spline->forward(in.vectors, rows);
    lap(timer, "radial_mlp");
    return;
  }
  const Tf32Scope tf32(layer.tf32);
  // With pairs, one MLP row per pair (its first edge's features, equal bit for bit to the second's).
  const at::Tensor ef = in.pairs ? s->geometry.ef.index_select(0, in.pairs->first) : s->geometry.ef;
  if (layer.first) {
    s->hidden = radial_mlp_hidden(layer.radial, ef, &s->mlp_pre);
  } else if (layer.output && ef.size(0) >= layer.split_min_rows) {
    radial_mlp_preactivations(layer.radial, ef, &s->mlp_pre);
    s->radial = layer.output->forward_silu(s->mlp_pre.back());
  } else {
    s->radial = radial_mlp_forward(layer.radial, ef, &s->mlp_pre);
  }
  if (layer.envelope) s->radial = s->radial * layer.envelope->value(in.vectors);
  lap(timer, "radial_mlp");
}

MessageChunkOutput message_chunk_forward(const EdgeGeometryOp& geometry, const MessageLayer& layer,
                                         const MessageChunkInput& in, MessageChunkState* s, bool aggregate,
                                         StageTimer* timer) {
  const InteractionParams& L = *layer.params;
  if (!s->prepared) message_chunk_prepare(geometry, layer, in, s, timer);
  MessageChunkOutput out;
  if (!aggregate) return out;
  if (layer.first) {
    const at::Tensor S = layer.first->sums(s->hidden, s->geometry.sh, in.x_index, in.row_ptr, in.nrows,
                                           in.x_table.size(0), radial_index(in));
    if (layer.first->folds_projection())
      out.sums = S;
    else
      out.aggregate = layer.first->aggregate(S, in.x_table);
  } else {
    // Fused gather + tensor product + radial weights + receiver sum: no per-edge message tensor.
    out.aggregate = conv_tp_aggregate(layer.tp, in.x_table, in.x_index, s->geometry.sh, s->radial, in.row_ptr, in.nrows,
                                      radial_index(in));
  }
  lap(timer, "tp_forward");
  if (L.density) {  // (NonLinear layers: prepared)
    s->density = density_forward(L, s->geometry.ef);
    if (layer.envelope) s->density = s->density * layer.envelope->value(in.vectors);
  }
  if (L.density_sums()) out.density = segment_sum(s->density.squeeze(1), in.row_ptr);
  return out;
}

MessageEdgeGrads message_chunk_backward_messages(const MessageLayer& layer, const MessageChunkInput& in,
                                                 const MessageChunkState& s, const at::Tensor& grad_aggregate,
                                                 at::Tensor* x_table_grad, StageTimer* timer) {
  const ConvTPOp& tp = layer.tp;
  if (layer.first && in.x_gradient)
    throw Error("message stage: a reassociated layer has no x-table gradient (its rows are species)");
  MessageEdgeGrads grads;
  if (layer.first) {
    const int64_t H = s.hidden.size(1);
    const at::Tensor dS = layer.first->folds_projection() ? layer.first->project_backward(grad_aggregate, in.x_table, H)
                                                          : layer.first->aggregate_backward(grad_aggregate, in.x_table, H);
    std::tie(grads.hidden, grads.harmonics) =
        layer.first->sums_backward(dS, s.hidden, s.geometry.sh, in.x_index, in.row_ptr, radial_index(in));
  } else {
    // With pairs, dR comes summed per shared row: the MLP's backward then runs on one row per pair.
    const bool by_row = in.pairs != nullptr;
    const ConvTPEdgeGrads g =
        in.x_gradient ? conv_tp_aggregate_backward(tp, grad_aggregate, in.x_table, in.x_index, s.geometry.sh, s.radial,
                                                   in.row_ptr, *x_table_grad,
                                                   in.x_csr ? *in.x_csr : xindex_csr(in.x_index, in.x_table.size(0)),
                                                   radial_index(in), by_row, s.dR_rows)
                      : conv_tp_aggregate_backward(tp, grad_aggregate, in.x_table, in.x_index, s.geometry.sh, s.radial,
                                                   in.row_ptr, {}, {}, radial_index(in), by_row, s.dR_rows);
    grads.radial = g.dR;
    grads.harmonics = g.dY;
  }
  lap(timer, "tp_backward");
  return grads;
}

namespace {

// a + b where either may be undefined
at::Tensor sum_of(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined()) return b;
  return b.defined() ? a + b : a;
}

}  // namespace

at::Tensor message_chunk_backward_edges(const EdgeGeometryOp& geometry, const MessageLayer& layer,
                                        const MessageChunkInput& in, MessageChunkState& s,
                                        const MessageEdgeGrads& grads, const at::Tensor& grad_density,
                                        StageTimer* timer, GeometryGradients* hold, const GeometryGradients* pending) {
  const InteractionParams& L = *layer.params;
  if ((hold || pending) && (layer.nonlinear || layer.envelope || layer.spline))
    throw Error("message stage: geometry gradients held or taken by a layer whose dE/dv has other parts");
  if (layer.nonlinear) {
    const Tf32Scope tf32(layer.tf32);
    const at::Tensor dd = grad_density.defined() ? grad_density.index_select(0, in.rows).unsqueeze(1) : at::Tensor();
    const auto [grad_ef, grad_v] = layer.nonlinear->backward(s.nonlinear, in.vectors, grads.radial, dd);
    lap(timer, "radial_backward");
    at::Tensor gv = geometry.vjp(s.geometry, grads.harmonics, grad_ef);
    if (grad_v.defined()) gv.add_(grad_v);
    lap(timer, "geometry_backward");
    s = MessageChunkState{};
    return gv;
  }
  at::Tensor grad_ef, grad_r;
  at::Tensor f, df_dv, grad_f;  // the envelope inside the interaction (apply_cutoff false), df/dv, dE/df
  if (layer.envelope) std::tie(f, df_dv) = layer.envelope->value_and_gradient(in.vectors);
  if (layer.spline) {
    at::Tensor g = layer.first ? grads.hidden : grads.radial;
    if (in.pairs && layer.first) g = sum_pair_rows(*in.pairs, g);
    grad_r = layer.spline->backward(in.vectors, in.pairs ? in.pairs->first : at::Tensor(), g);
  } else {
    const Tf32Scope tf32(layer.tf32);
    // Through the output layer: per edge, or per shared row (dR already summed over its pair).
    at::Tensor grad_hidden = layer.first ? grads.hidden : radial_mm(grads.radial, layer.radial.back().t());
    if (layer.envelope) {
      // R = f (a W) for the last hidden activation a: dE/df = sum((dR W^T) a)
      const at::Tensor a = s.mlp_pre.empty() ? s.geometry.ef : at::silu(s.mlp_pre.back());
      grad_f = (grad_hidden * a).sum(1, true);
      grad_hidden = grad_hidden * f;
    }
    // A pair's MLP row gets both edges' gradients; its distance gradient goes half to each edge.
    if (in.pairs && layer.first) grad_hidden = sum_pair_rows(*in.pairs, grad_hidden);
    grad_ef = radial_mlp_hidden_vjp(layer.radial, s.mlp_pre, grad_hidden);
    if (in.pairs) grad_ef = grad_ef.index_select(0, in.pairs->index) * in.pairs->share;
  }
  if (L.density) {
    at::Tensor dd = grad_density.index_select(0, in.rows).unsqueeze(1);
    if (layer.envelope) {
      const at::Tensor gf = dd * density_forward(L, s.geometry.ef);
      grad_f = grad_f.defined() ? grad_f + gf : gf;
      dd = dd * f;
    }
    const at::Tensor d = density_vjp(L, s.geometry.ef, dd);
    grad_ef = grad_ef.defined() ? grad_ef + d : d;
  }
  lap(timer, "radial_backward");
  if (hold) {
    hold->harmonics = sum_of(hold->harmonics, grads.harmonics);
    hold->ef = sum_of(hold->ef, grad_ef);
    s = MessageChunkState{};
    return {};
  }
  const at::Tensor grad_sh = pending ? sum_of(grads.harmonics, pending->harmonics) : grads.harmonics;
  if (pending) grad_ef = sum_of(grad_ef, pending->ef);
  at::Tensor gv = geometry.vjp(s.geometry, grad_sh, grad_ef);
  if (grad_f.defined()) gv.add_(grad_f * df_dv);
  if (grad_r.defined()) layer.spline->add_edge_gradient(in.vectors, in.pairs, grad_r, gv);
  lap(timer, "geometry_backward");
  s = MessageChunkState{};
  return gv;
}

at::Tensor message_chunk_backward(const EdgeGeometryOp& geometry, const MessageLayer& layer,
                                  const MessageChunkInput& in, MessageChunkState& s, const at::Tensor& grad_aggregate,
                                  const at::Tensor& grad_density, at::Tensor* x_table_grad, StageTimer* timer) {
  const MessageEdgeGrads grads = message_chunk_backward_messages(layer, in, s, grad_aggregate, x_table_grad, timer);
  return message_chunk_backward_edges(geometry, layer, in, s, grads, grad_density, timer);
}

}  // namespace flashmace
