#include "model/mace_forward.h"

#include <cmath>

#include "model/e3nn_ops.h"
#include "model/halo_exchange_op.h"
#include "model/radial.h"
#include "model/spherical_harmonics.h"

namespace flashmace {

namespace {

at::Tensor scatter_sum(const at::Tensor& src, const at::Tensor& index, int64_t n) {
  std::vector<int64_t> shape = src.sizes().vec();
  shape[0] = n;
  return at::zeros(shape, src.options()).index_add(0, index, src);
}

void record(Trace* trace, const std::string& name, const at::Tensor& t) {
  if (trace) (*trace)[name] = t.detach();
}

void lap(StageTimer* timer, const char* stage) {
  if (timer) timer->lap(stage);
}

// mace-torch's RadialMLP: Linear -> LayerNorm (eps 1e-5) -> SiLU per hidden layer, Linear last.
at::Tensor normed_mlp(const at::Tensor& x, const NormedMLP& mlp) {
  at::Tensor y = x;
  for (std::size_t k = 0; k < mlp.weight.size(); ++k) {
    y = at::linear(y, mlp.weight[k], mlp.bias[k]);
    if (k < mlp.norm_weight.size())
      y = at::silu(at::layer_norm(y, {y.size(1)}, mlp.norm_weight[k], mlp.norm_bias[k], 1e-5));
  }
  return y;
}

at::Tensor times_envelope(const at::Tensor& x, const at::Tensor& envelope) {
  return envelope.defined() ? x * envelope : x;
}

// A RealAgnosticResidualNonLinearInteractionBlock (docs/model-format.md, "NonLinear blocks"):
// returns A [N, C, K] and sc.
std::pair<at::Tensor, at::Tensor> nonlinear_interaction(const MaceParams& m, const InteractionParams& L,
                                                        const GraphTensors& g,
                                                        const at::Tensor& h, const at::Tensor& sh,
                                                        const at::Tensor& ef, const at::Tensor& envelope,
                                                        StageTimer* timer) {
  const int64_t n = h.size(0);
  const at::Tensor sc = e3nn_linear(h, L.skip_tp, L.in, L.out);
  const at::Tensor hu = e3nn_linear(h, L.linear_up, L.in, L.edge);
  const at::Tensor res = e3nn_linear(hu, L.linear_res, L.edge, L.gate);
  lap(timer, "linears");
  // The radial MLPs see the edge's species: [radial features, sender's, receiver's embedding].
  const at::Tensor x = at::cat({ef, L.source_embedding.index_select(0, g.species.index_select(0, g.sender)),
                                L.target_embedding.index_select(0, g.species.index_select(0, g.receiver))},
                               1);
  const at::Tensor R = times_envelope(normed_mlp(x, L.radial_net), envelope);
  const at::Tensor d = times_envelope(at::tanh(at::pow(normed_mlp(x, L.density_net), 2)), envelope);
  lap(timer, "radial");
  const at::Tensor msg = conv_tensor_product(hu.index_select(0, g.sender), sh, R, L.edge, m.sh, L.tp, L.tp_w3j);
  const at::Tensor aggregated = scatter_sum(msg, g.receiver, n);
  lap(timer, "tensor_product");
  const at::Tensor normalised = e3nn_linear(aggregated, L.linear, L.tp.mid, L.gate) /
                                (scatter_sum(d, g.receiver, n) * L.beta + L.alpha);
  const at::Tensor A = e3nn_linear(gate(normalised + res, L.target), L.linear_2, L.target, L.target);
  lap(timer, "linears");
  return {at::cat(split_irreps(A, L.target), 2), sc};
}

// One RealAgnostic*InteractionBlock (mace_spec.md 6): returns A [N, C, K] and sc (or undefined).
std::pair<at::Tensor, at::Tensor> interaction(const MaceParams& m, const InteractionParams& L, const GraphTensors& g,
                                              const at::Tensor& h, const at::Tensor& sh, const at::Tensor& ef,
                                              const at::Tensor& envelope, StageTimer* timer) {
  const int64_t n = h.size(0);
  const int Z = m.config.num_elements();
  at::Tensor sc;
  if (L.residual) sc = element_linear(h, g.species, L.skip_tp, L.in, Z, L.out);
  const at::Tensor hu = e3nn_linear(h, L.linear_up, L.in, L.edge);
  lap(timer, "linears");
  const at::Tensor R = times_envelope(radial_mlp(ef, L.radial_layers), envelope);
  lap(timer, "radial");
  const at::Tensor msg = conv_tensor_product(hu.index_select(0, g.sender), sh, R, L.edge, m.sh, L.tp, L.tp_w3j);
  const at::Tensor aggregated = scatter_sum(msg, g.receiver, n);
  lap(timer, "tensor_product");
  at::Tensor M = e3nn_linear(aggregated, L.linear, L.tp.mid, L.target);
  if (L.density) {
    // mace_spec.md 6.3: normalise by (1 + smooth neighbour density) instead of avg_num_neighbors
    const double nb = static_cast<double>(L.density_weight.size(0));
    const at::Tensor d = at::tanh(at::pow(at::matmul(ef, L.density_weight) / std::sqrt(nb), 2));
    M = M / (scatter_sum(times_envelope(d, envelope), g.receiver, n) + 1.0);
  } else {
    M = M / L.avg_num_neighbors;
  }
  if (!L.residual) M = element_linear(M, g.species, L.skip_tp, L.target, Z, L.target);
  // reshape_irreps: [N, dim] -> per block [N, C, 2l+1] -> concatenated on the last axis
  const auto blocks = split_irreps(M, L.target);
  at::Tensor A = at::cat(blocks, 2);
  lap(timer, "linears");
  return {A, sc};
}

}  // namespace

// Radial edge features (mace_spec.md 3.3): Bessel basis of the (optionally transformed)
// distance, times the polynomial envelope of the raw distance unless the model applies the
// envelope inside its interactions instead (apply_cutoff false).
at::Tensor edge_features(const MaceParams& m, const at::Tensor& r, const at::Tensor& z_sender,
                         const at::Tensor& z_receiver) {
  at::Tensor rb = r;
  if (m.config.distance_transform == "Agnesi")
    rb = agnesi_transform(r, covalent_radius_sum(m.transform_covalent_radii, z_sender, z_receiver), m.transform_q,
                          m.transform_p, m.transform_a);
  else if (m.config.distance_transform == "Soft")
    rb = soft_transform(r, covalent_radius_sum(m.transform_covalent_radii, z_sender, z_receiver), m.transform_alpha);
  const at::Tensor b = bessel_basis(rb, m.bessel_weights, m.config.r_max);
  return m.config.apply_cutoff ? b * polynomial_cutoff(r, m.r_max, m.cutoff_p) : b;
}

at::Tensor readout(const InteractionParams& L, const at::Tensor& h, int channels, bool last, const Irreps& mlp) {
  const Irreps scalar_in = Irreps::scalars(channels);
  const at::Tensor h0 = h.narrow(1, 0, channels);  // only the 0e block reaches the readout
  const Irreps one = Irreps::scalars(1);
  if (!last) return e3nn_linear(h0, L.readout[0], scalar_in, one);
  const at::Tensor z = normalized_silu(e3nn_linear(h0, L.readout[0], scalar_in, mlp));
  return e3nn_linear(z, L.readout[1], mlp, one);
}

at::Tensor mace_interaction_energy(const MaceParams& m, const GraphTensors& g, const at::Tensor& v, Trace* trace,
                                   HaloExchanger* halo, StageTimer* timer) {
  const MaceConfig& c = m.config;
  const int64_t n = g.species.size(0);
  const at::Tensor r = at::linalg_vector_norm(v, 2, {1}, true);
  const at::Tensor z_node = m.atomic_numbers.index_select(0, g.species);
  const at::Tensor z_sender = z_node.index_select(0, g.sender), z_receiver = z_node.index_select(0, g.receiver);

  const at::Tensor sh = m.spherical_harmonics(v);
  lap(timer, "spherical_harmonics");
  const at::Tensor ef = edge_features(m, r, z_sender, z_receiver);
  const at::Tensor envelope = c.apply_cutoff ? at::Tensor() : polynomial_cutoff(r, m.r_max, m.cutoff_p);
  // use_agnostic_product: one symmetric-contraction weight set, element 0, for every atom.
  const at::Tensor sc_species = c.use_agnostic_product ? at::zeros_like(g.species) : g.species;
  lap(timer, "radial");
  at::Tensor h = m.node_embedding.index_select(0, g.species) / std::sqrt(static_cast<double>(c.num_elements()));
  record(trace, "edge_attrs", sh);
  record(trace, "edge_feats", ef);
  record(trace, "embedding", h);

  at::Tensor energy = at::zeros({n}, v.options());
  if (m.zbl)
    energy = energy + scatter_sum(zbl_edge_energy(r, z_sender, z_receiver, m.zbl_params), g.receiver, n).squeeze(1);

  const Irreps mlp = Irreps::parse(c.mlp_irreps);
  for (int t = 0; t < c.num_interactions; ++t) {
    const InteractionParams& L = m.layers[t];
    const std::string prefix = "layer" + std::to_string(t) + ".";
    auto [A, sc] = L.nonlinear ? nonlinear_interaction(m, L, g, h, sh, ef, envelope, timer)
                               : interaction(m, L, g, h, sh, ef, envelope, timer);
    record(trace, prefix + "interaction_message", A);
    if (sc.defined()) record(trace, prefix + "interaction_sc", sc);
    std::vector<at::Tensor> parts;
    for (const auto& cw : L.contractions) parts.push_back(symmetric_contraction(A, sc_species, cw));
    const at::Tensor B = at::cat(parts, 1);
    lap(timer, "symmetric_contraction");
    h = e3nn_linear(B, L.product_linear, L.out, L.out);
    if (sc.defined()) h = h + sc;
    lap(timer, "linears");
    record(trace, prefix + "product_out", h);
    const at::Tensor e = readout(L, h, c.channels(), t == c.num_interactions - 1, mlp);
    record(trace, prefix + "readout", e);
    energy = energy + e.squeeze(1);
    lap(timer, "readout");
    // Ghost rows received incomplete messages; the next layer needs their owners' features.
    if (halo && t + 1 < c.num_interactions) {
      h = halo_exchange(h, halo);
      lap(timer, "halo_exchange");
    }
  }
  return c.scale.front() * energy + c.shift.front();  // (one head: ModelFile::select_head)
}

}  // namespace flashmace
