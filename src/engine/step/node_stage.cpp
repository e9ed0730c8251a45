#include "engine/step/node_stage.h"

#include "core/error.h"
#include "engine/ops/gate_backward.h"
#include "model/e3nn_ops.h"
#include "model/stage_timer.h"

namespace flashmace {

namespace {

void lap(StageTimer* timer, const char* stage) {
  if (timer) timer->lap(stage);
}

}  // namespace

NodeLinears::NodeLinears(const MaceParams& m, int t, IrrepsLayout features) {
  const InteractionParams& L = m.layers[t];
  const MaceConfig& c = m.config;
  const Irreps scalars = Irreps::scalars(c.channels()), one = Irreps::scalars(1);
  if (L.nonlinear)
    nonlinear = NonLinear{IrrepsLinear(L.skip_tp, L.in, L.out), IrrepsLinear(L.linear_res, L.edge, L.gate),
                          IrrepsLinear(L.linear_2, L.target, L.target)};
  else if (L.residual)
    skip = SpeciesLinear(L.skip_tp, L.in, c.num_elements(), L.out);
  else
    skip = SpeciesLinear(L.skip_tp, L.target, c.num_elements(), L.target);
  product = IrrepsLinear(L.product_linear, L.out, L.out);
  if (features == IrrepsLayout::IrMul) {
    if (L.nonlinear) throw Error("node linears: NonLinear blocks keep their features in mul_ir");
    skip.set_layouts(IrrepsLayout::IrMul, IrrepsLayout::IrMul);
    product.set_layouts(IrrepsLayout::MulIr, IrrepsLayout::IrMul);  // (B, the contraction's output, is mul_ir)
  }
  if (t < c.num_interactions - 1) {
    readout.emplace_back(L.readout[0], scalars, one);
  } else {
    const Irreps mlp = Irreps::parse(c.mlp_irreps);
    readout.emplace_back(L.readout[0], scalars, mlp);
    readout.emplace_back(L.readout[1], mlp, one);
  }
  // (the normalised SiLU's backward runs as silu_backward, its normalisation folded in here: it is
  // linear in the incoming gradient)
  const double weight = c.scale.front() * (readout.size() == 1 ? 1.0 : kSiluNormalization);
  readout_gradient = readout.back().transpose(at::full({1, 1}, weight, L.readout[0].options()));
}

NodeChunkOutput node_chunk_forward(const MaceParams& m, int t, const NodeLinears& lin, const ScOp& sc,
                                   const NodeChunkInput& in, NodeChunkState* s, StageTimer* timer) {
  const InteractionParams& L = m.layers[t];
  const MaceConfig& c = m.config;
  if (lin.nonlinear) {
    s->m = in.mlin / (in.density.unsqueeze(1) * L.beta + L.alpha);
    lin.nonlinear->residual.forward_into(in.hu_in, s->m, /*accumulate=*/true);
    s->sc_a = lin.nonlinear->output.forward(gate(s->m, L.target));
  } else {
    const at::Tensor m0 = L.density ? in.mlin / (in.density.unsqueeze(1) + 1.0) : in.mlin;
    s->m = L.residual ? m0 : lin.skip.forward(m0, in.groups);
    s->sc_a = s->m;  // (the SC reads mul_ir rows)
  }
  lap(timer, "nodes_forward");
  const at::Tensor b = sc.forward(s->sc_a, in.species);
  lap(timer, "sc_forward");
  NodeChunkOutput out;
  s->h = lin.product.forward(b);
  if (lin.nonlinear)
    lin.nonlinear->skip.forward_into(in.h_in, s->h, /*accumulate=*/true);
  else if (L.residual)
    lin.skip.forward_add(in.h_in, in.groups, s->h);
  out.h = s->h;
  // Readout (mace_spec.md 8): only the 0e block of h reaches it.
  const at::Tensor h0 = s->h.narrow(1, 0, c.channels());
  if (lin.readout.size() == 1) {
    out.energy = lin.readout[0].forward(h0).squeeze(1);
  } else {
    s->readout_pre = lin.readout[0].forward(h0);
    out.energy = lin.readout[1].forward(normalized_silu(s->readout_pre)).squeeze(1);
  }
  return out;
}

NodeChunkGradients node_chunk_backward(const MaceParams& m, int t, const NodeLinears& lin, const ScOp& sc,
                                       const NodeChunkInput& in, NodeChunkState& s, const at::Tensor& grad_h,
                                       StageTimer* timer) {
  const InteractionParams& L = m.layers[t];
  const MaceConfig& c = m.config;

  // readout: its gradient added to the 0e columns of dE/dh (the caller's rows, in place)
  const at::Tensor& gh = grad_h;
  const at::Tensor gh0 = gh.narrow(1, 0, c.channels());
  if (lin.readout.size() == 1) {
    gh0.add_(lin.readout_gradient);
  } else {
    const at::Tensor ga = lin.readout_gradient.expand_as(s.readout_pre);
    lin.readout[0].transpose_into(at::silu_backward(ga, s.readout_pre), gh0, /*accumulate=*/true);
  }

  NodeChunkGradients out;
  if (lin.nonlinear)
    out.h_in = lin.nonlinear->skip.transpose(gh);
  else if (L.residual)
    out.h_in = lin.skip.transpose(gh, in.groups);
  const at::Tensor gb = lin.product.transpose(gh);
  lap(timer, "nodes_backward");
  const at::Tensor ga = sc.backward(s.sc_a, in.species, gb);
  lap(timer, "sc_backward");
  at::Tensor gm = ga;
  if (lin.nonlinear) {
    // m = mlin / (beta D + alpha) + linear_res(hu); A = linear_2(gate(m))
    gm = gate_backward(s.m, lin.nonlinear->output.transpose(gm), L.target);
    const at::Tensor den = in.density.unsqueeze(1) * L.beta + L.alpha;
    out.mlin = gm / den;
    out.density = -(gm * in.mlin).sum(1) * L.beta / (den * den).squeeze(1);
    out.hu_in = lin.nonlinear->residual.transpose(gm);
    s = NodeChunkState{};
    return out;
  }
  if (!L.residual) gm = lin.skip.transpose(gm, in.groups);
  if (L.density) {
    const at::Tensor d1 = in.density.unsqueeze(1) + 1.0;
    out.mlin = gm / d1;
    out.density = -(gm * in.mlin).sum(1) / (d1 * d1).squeeze(1);
  } else {
    out.mlin = gm;
  }
  s = NodeChunkState{};
  return out;
}

}  // namespace flashmace
