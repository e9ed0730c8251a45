#include "engine/node_stage.h"

#include "model/e3nn_ops.h"
#include "model/stage_timer.h"

namespace flashmace {

namespace {

// [n, dim] in mul_ir layout with all blocks of multiplicity C -> [n, C, K] (blocks side by side on
// the last axis), and back.
at::Tensor to_channels(const at::Tensor& x, const Irreps& irreps) { return at::cat(split_irreps(x, irreps), 2); }

at::Tensor from_channels(const at::Tensor& a, const Irreps& irreps) {
  std::vector<at::Tensor> blocks;
  int64_t offset = 0;
  for (const auto& b : irreps.blocks()) {
    blocks.push_back(a.narrow(2, offset, b.ir.dim()).reshape({a.size(0), b.dim()}));
    offset += b.ir.dim();
  }
  return at::cat(blocks, 1);
}

void lap(StageTimer* timer, const char* stage) {
  if (timer) timer->lap(stage);
}

}  // namespace

NodeChunkOutput node_chunk_forward(const MaceParams& m, int t, const ScOp& sc, const NodeChunkInput& in,
                                   NodeChunkState* s, StageTimer* timer) {
  const InteractionParams& L = m.layers[t];
  const MaceConfig& c = m.config;
  const int Z = c.num_elements();
  const at::Tensor m0 = L.density ? in.mlin / (in.density.unsqueeze(1) + 1.0) : in.mlin / L.avg_num_neighbors;
  s->m = L.residual ? m0 : species_linear(m0, in.groups, L.skip_tp, L.target, Z, L.target);
  s->sc_a = to_channels(s->m, L.target).contiguous();
  lap(timer, "nodes_forward");
  const at::Tensor b = sc.forward(s->sc_a, in.species);
  lap(timer, "sc_forward");
  NodeChunkOutput out;
  s->h = e3nn_linear(b, L.product_linear, L.out, L.out);
  if (L.residual) s->h = s->h + species_linear(in.h_in, in.groups, L.skip_tp, L.in, Z, L.out);
  out.h = s->h;
  // Readout (mace_spec.md 8): only the 0e block of h reaches it.
  const Irreps scalars = Irreps::scalars(c.channels()), one = Irreps::scalars(1);
  const at::Tensor h0 = s->h.narrow(1, 0, c.channels());
  if (t < c.num_interactions - 1) {
    out.energy = e3nn_linear(h0, L.readout[0], scalars, one).squeeze(1);
  } else {
    const Irreps mlp = Irreps::parse(c.mlp_irreps);
    s->readout_pre = e3nn_linear(h0, L.readout[0], scalars, mlp);
    out.energy = e3nn_linear(normalized_silu(s->readout_pre), L.readout[1], mlp, one).squeeze(1);
  }
  return out;
}

NodeChunkGradients node_chunk_backward(const MaceParams& m, int t, const ScOp& sc, const NodeChunkInput& in,
                                       NodeChunkState& s, const at::Tensor& grad_h, double energy_weight,
                                       StageTimer* timer) {
  const InteractionParams& L = m.layers[t];
  const MaceConfig& c = m.config;
  const int Z = c.num_elements();
  const int64_t n = in.species.size(0);
  const Irreps scalars = Irreps::scalars(c.channels()), one = Irreps::scalars(1);
  const at::Tensor ge = at::full({n, 1}, energy_weight, grad_h.options());

  // readout
  at::Tensor gh0;
  if (t < c.num_interactions - 1) {
    gh0 = e3nn_linear_transpose(ge, L.readout[0], scalars, one);
  } else {
    const Irreps mlp = Irreps::parse(c.mlp_irreps);
    const at::Tensor ga = e3nn_linear_transpose(ge, L.readout[1], mlp, one);
    const at::Tensor sig = at::sigmoid(s.readout_pre);
    const at::Tensor gz = ga * (kSiluNormalization * sig * (1.0 + s.readout_pre * (1.0 - sig)));
    gh0 = e3nn_linear_transpose(gz, L.readout[0], scalars, mlp);
  }
  at::Tensor gh = grad_h.clone();
  gh.narrow(1, 0, c.channels()).add_(gh0);

  NodeChunkGradients out;
  if (L.residual) out.h_in = species_linear_transpose(gh, in.groups, L.skip_tp, L.in, Z, L.out);
  const at::Tensor gb = e3nn_linear_transpose(gh, L.product_linear, L.out, L.out);
  lap(timer, "nodes_backward");
  const at::Tensor ga = sc.backward(s.sc_a, in.species, gb);
  lap(timer, "sc_backward");
  at::Tensor gm = from_channels(ga, L.target);
  if (!L.residual) gm = species_linear_transpose(gm, in.groups, L.skip_tp, L.target, Z, L.target);
  if (L.density) {
    const at::Tensor d1 = in.density.unsqueeze(1) + 1.0;
    out.mlin = gm / d1;
    out.density = -(gm * in.mlin).sum(1) / (d1 * d1).squeeze(1);
  } else {
    out.mlin = gm / L.avg_num_neighbors;
  }
  s = NodeChunkState{};
  return out;
}

}  // namespace flashmace
