#pragma once
// MACE's state_dict names (mace-torch's module paths) for the tensors a flashmace model file holds
// (docs/model-format.md), in one place: the model file's validation, the reference path's
// parameters and the SC descriptor all read tensors by these names.
#include <string>

namespace flashmace::mace_tensors {

inline const std::string kAtomicNumbers = "atomic_numbers";
inline const std::string kNodeEmbedding = "node_embedding.linear.weight";
inline const std::string kBesselWeights = "radial_embedding.bessel_fn.bessel_weights";
inline const std::string kAtomicEnergies = "atomic_energies_fn.atomic_energies";

// Distance transforms' parameters: q, p, a (Agnesi), alpha (Soft), covalent_radii (both).
inline std::string distance_transform(const std::string& name) { return "radial_embedding.distance_transform." + name; }
// ZBL pair repulsion's parameters: c, covalent_radii, a_exp, a_prefactor, p.
inline std::string pair_repulsion(const std::string& name) { return "pair_repulsion_fn." + name; }

// Interaction block t: linear_up.weight, linear.weight, skip_tp.weight, density_fn.layer0.weight.
inline std::string interaction(int t, const std::string& name) {
  return "interactions." + std::to_string(t) + "." + name;
}
// Module k of a torch.nn.Sequential MLP of interaction t (NonLinear blocks: mlp "conv_tp_weights"
// or "density_fn"; k counts Linear, LayerNorm and SiLU modules), tensor "weight" or "bias".
inline std::string interaction_mlp(int t, const std::string& mlp, std::size_t k, const std::string& tensor) {
  return interaction(t, mlp + ".net." + std::to_string(k) + "." + tensor);
}
// Layer k of interaction t's radial MLP (e3nn FullyConnectedNet).
inline std::string radial_mlp_layer(int t, std::size_t k) {
  return interaction(t, "conv_tp_weights.layer" + std::to_string(k) + ".weight");
}

// Product block t: linear.weight.
inline std::string product(int t, const std::string& name) { return "products." + std::to_string(t) + "." + name; }
// The symmetric contraction of product t's output block o: its coupling tensor of order nu.
inline std::string sc_coupling(int t, std::size_t o, int nu) {
  return product(t, "symmetric_contractions.contractions." + std::to_string(o) + ".U_matrix_" + std::to_string(nu));
}
// Its weights of order nu (mace_spec.md 7.2: weights_max holds nu_max, weights.j holds nu_max - 1 - j).
inline std::string sc_weights(int t, std::size_t o, int nu, int nu_max) {
  const std::string block = product(t, "symmetric_contractions.contractions." + std::to_string(o) + ".");
  return nu == nu_max ? block + "weights_max" : block + "weights." + std::to_string(nu_max - 1 - nu);
}

// Readout t: linear.weight (linear readouts), linear_1.weight and linear_2.weight (the last, an MLP).
inline std::string readout(int t, const std::string& name) { return "readouts." + std::to_string(t) + "." + name; }

// System embeddings (mace-torch's GenericJointEmbedding): embedder `name`'s table (categorical:
// "weight") or its Linear -> SiLU -> Linear (continuous: "0.weight", "0.bias", "2.weight", "2.bias"),
// the projection of their concatenation, and the embedding readout (use_embedding_readout).
inline std::string system_embedder(const std::string& name, const std::string& tensor) {
  return "joint_embedding.embedders." + name + "." + tensor;
}
inline const std::string kSystemProjection = "joint_embedding.project.0.weight";
inline const std::string kEmbeddingReadout = "embedding_readout.linear.weight";

}  // namespace flashmace::mace_tensors
