#include "engine/message_stage.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include "model/e3nn_ops.h"
#include "model/edge_outputs.h"

namespace flashmace {

at::Tensor segment_sum(const at::Tensor& values, const at::Tensor& rows, int64_t nrows) {
  const at::Tensor lengths = at::bincount(rows, {}, nrows);
  return at::segment_reduce(values, "sum", lengths, {}, {}, 0, /*unsafe=*/true, at::Scalar(0));
}

void add_rows_deterministic(at::Tensor& table, const at::Tensor& index, const at::Tensor& values) {
  if (index.size(0) == 0) return;
  // Sum per distinct row in edge order first, then add each distinct row once.
  const auto unique = at::_unique2(index, /*sorted=*/true, /*return_inverse=*/true, /*return_counts=*/false);
  const at::Tensor distinct = std::get<0>(unique), inverse = std::get<1>(unique);
  table.index_add_(0, distinct, index_sum(values, inverse, distinct.size(0)));
}

MessageChunkOutput message_chunk_forward(const MaceParams& m, const InteractionParams& L, const MessageChunkInput& in,
                                         MessageChunkState* s) {
  s->geometry = edge_geometry(m, in.vectors, in.z_sender, in.z_receiver);
  s->radial = radial_mlp_forward(L.radial_layers, s->geometry.ef, &s->mlp_pre);
  MessageChunkOutput out;
  {
    const c10::AutoGradMode grad(true);
    s->tp_x = in.x_table.index_select(0, in.x_index).detach().requires_grad_(in.x_gradient);
    s->tp_sh = s->geometry.sh.detach().requires_grad_(true);
    s->tp_radial = s->radial.detach().requires_grad_(true);
    s->tp_msg = conv_tensor_product(s->tp_x, s->tp_sh, s->tp_radial, L.in, m.sh, L.tp, L.tp_w3j);
  }
  out.aggregate = segment_sum(s->tp_msg.detach(), in.rows, in.nrows);
  if (L.density) {
    s->density = density_forward(L, s->geometry.ef);
    out.density = segment_sum(s->density.squeeze(1), in.rows, in.nrows);
  }
  return out;
}

at::Tensor message_chunk_backward(const MaceParams& m, const InteractionParams& L, const MessageChunkInput& in,
                                  MessageChunkState& s, const at::Tensor& grad_aggregate,
                                  const at::Tensor& grad_density, at::Tensor* x_table_grad) {
  const c10::AutoGradMode grad(true);
  std::vector<at::Tensor> inputs = {s.tp_sh, s.tp_radial};
  if (in.x_gradient) inputs.push_back(s.tp_x);
  const std::vector<at::Tensor> g = torch::autograd::grad({s.tp_msg}, inputs, {grad_aggregate.index_select(0, in.rows)},
                                                          /*retain_graph=*/false, /*create_graph=*/false,
                                                          /*allow_unused=*/true);
  const at::NoGradGuard no_grad;
  at::Tensor grad_sh = g[0].defined() ? g[0] : at::zeros_like(s.tp_sh);
  at::Tensor grad_radial = g[1].defined() ? g[1] : at::zeros_like(s.tp_radial);
  if (in.x_gradient && g[2].defined()) add_rows_deterministic(*x_table_grad, in.x_index, g[2]);
  at::Tensor grad_ef = radial_mlp_vjp(L.radial_layers, s.geometry.ef, s.mlp_pre, grad_radial);
  if (L.density) grad_ef = grad_ef + density_vjp(L, s.geometry.ef, grad_density.index_select(0, in.rows).unsqueeze(1));
  const at::Tensor gv = edge_geometry_vjp(m, s.geometry, grad_sh, grad_ef);
  s = MessageChunkState{};
  return gv;
}

}  // namespace flashmace
