#include "model/mace_params.h"

#include <cmath>

#include "core/mace_tensor_names.h"
#include "core/wigner3j.h"

namespace flashmace {

namespace {

at::ScalarType scalar_type_of(DType d) {
  switch (d) {
    case DType::F64:
      return at::kDouble;
    case DType::F32:
      return at::kFloat;
    case DType::I64:
      return at::kLong;
    case DType::I32:
      return at::kInt;
    case DType::I16:
      return at::kShort;
    case DType::I8:
      return at::kChar;
    case DType::U8:
      return at::kByte;
    case DType::BOOL:
      return at::kBool;
    case DType::F16:
      return at::kHalf;
    case DType::BF16:
      return at::kBFloat16;
  }
  return at::kDouble;
}

NormedMLP normed_mlp(const ModelFile& file, int t, const std::string& name, const at::TensorOptions& f) {
  namespace n = mace_tensors;
  NormedMLP mlp;
  // Modules come in threes (Linear, LayerNorm, SiLU); the last Linear has no LayerNorm after it.
  for (std::size_t k = 0; file.has(n::interaction_mlp(t, name, 3 * k, "weight")); ++k) {
    mlp.weight.push_back(tensor_from_file(file, n::interaction_mlp(t, name, 3 * k, "weight"), f));
    mlp.bias.push_back(tensor_from_file(file, n::interaction_mlp(t, name, 3 * k, "bias"), f));
    if (file.has(n::interaction_mlp(t, name, 3 * k + 1, "weight"))) {
      mlp.norm_weight.push_back(tensor_from_file(file, n::interaction_mlp(t, name, 3 * k + 1, "weight"), f));
      mlp.norm_bias.push_back(tensor_from_file(file, n::interaction_mlp(t, name, 3 * k + 1, "bias"), f));
    }
  }
  return mlp;
}

}  // namespace

at::Tensor tensor_from_file(const ModelFile& file, const std::string& key, const at::TensorOptions& options) {
  const TensorView& v = file.tensor(key);
  // from_blob does not own the bytes: clone before converting so the result outlives the file.
  const at::Tensor raw =
      at::from_blob(const_cast<unsigned char*>(v.data), v.shape, at::TensorOptions().dtype(scalar_type_of(v.dtype)));
  return raw.clone().to(options);
}

MaceParams MaceParams::load(const ModelFile& file, at::ScalarType dtype, at::Device device) {
  MaceParams m;
  m.config = file.config();
  const MaceConfig& c = m.config;
  m.options = at::TensorOptions().dtype(dtype).device(device);
  const at::TensorOptions f = m.options;
  const at::TensorOptions i64 = at::TensorOptions().dtype(at::kLong).device(device);
  m.sh = c.sh_irreps();
  m.spherical_harmonics = SphericalHarmonics(c.max_ell, f);
  const int Z = c.num_elements(), C = c.channels();

  namespace n = mace_tensors;
  m.atomic_numbers = tensor_from_file(file, n::kAtomicNumbers, i64);
  m.node_embedding = tensor_from_file(file, n::kNodeEmbedding, f).reshape({Z, C});
  m.atomic_energies = tensor_from_file(file, n::kAtomicEnergies, f);
  m.atomic_energies_f64 = tensor_from_file(file, n::kAtomicEnergies, f.dtype(at::kDouble));
  m.bessel_weights = tensor_from_file(file, n::kBesselWeights, f);
  m.r_max = at::scalar_tensor(c.r_max, f);
  m.cutoff_p = c.num_polynomial_cutoff;
  if (c.distance_transform == "Agnesi") {
    m.transform_q = tensor_from_file(file, n::distance_transform("q"), f).reshape({});
    m.transform_p = tensor_from_file(file, n::distance_transform("p"), f).reshape({});
    m.transform_a = tensor_from_file(file, n::distance_transform("a"), f).reshape({});
    m.transform_covalent_radii = tensor_from_file(file, n::distance_transform("covalent_radii"), f);
  } else if (c.distance_transform == "Soft") {
    m.transform_alpha = tensor_from_file(file, n::distance_transform("alpha"), f).reshape({});
    m.transform_covalent_radii = tensor_from_file(file, n::distance_transform("covalent_radii"), f);
  }
  m.zbl = c.pair_repulsion;
  if (m.zbl) {
    m.zbl_params.c = tensor_from_file(file, n::pair_repulsion("c"), f);
    m.zbl_params.covalent_radii = tensor_from_file(file, n::pair_repulsion("covalent_radii"), f);
    m.zbl_params.a_exp = tensor_from_file(file, n::pair_repulsion("a_exp"), f).reshape({});
    m.zbl_params.a_prefactor = tensor_from_file(file, n::pair_repulsion("a_prefactor"), f).reshape({});
    m.zbl_params.p = file.has(n::pair_repulsion("p"))
                         ? static_cast<int>(file.file().to_doubles(n::pair_repulsion("p"))[0])
                         : c.num_polynomial_cutoff;
  }

  const Irreps target = c.interaction_target();
  for (int t = 0; t < c.num_interactions; ++t) {
    InteractionParams L;
    L.in = c.layer_input(t);
    L.out = c.layer_output(t);
    L.target = target;
    L.edge = c.layer_edge_irreps(t);
    L.tp = conv_tp_layout(L.edge, m.sh, target);
    for (const auto& p : L.tp.paths) {
      const int l1 = L.edge[p.i1].ir.l, l2 = m.sh[p.i2].ir.l, l3 = L.tp.mid[p.k].ir.l;
      L.tp_w3j.push_back(at::tensor(wigner_3j(l1, l2, l3), at::TensorOptions().dtype(at::kDouble))
                             .reshape({2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1})
                             .to(f));
    }
    L.residual = c.residual(t);
    L.density = c.density(t);
    L.nonlinear = c.nonlinear(t);
    L.avg_num_neighbors = c.avg_num_neighbors[t];
    L.linear_up = tensor_from_file(file, n::interaction(t, "linear_up.weight"), f);
    L.skip_tp = tensor_from_file(file, n::interaction(t, "skip_tp.weight"), f);
    if (L.nonlinear) {
      L.gate = c.gate_input();
      const double inv_sqrt_z = 1.0 / std::sqrt(static_cast<double>(Z));
      L.source_embedding = tensor_from_file(file, n::interaction(t, "source_embedding.weight"), f).reshape({Z, C}) * inv_sqrt_z;
      L.target_embedding = tensor_from_file(file, n::interaction(t, "target_embedding.weight"), f).reshape({Z, C}) * inv_sqrt_z;
      L.radial_net = normed_mlp(file, t, "conv_tp_weights", f);
      L.density_net = normed_mlp(file, t, "density_fn", f);
      L.linear = tensor_from_file(file, n::interaction(t, "linear_1.weight"), f);
      L.linear_res = tensor_from_file(file, n::interaction(t, "linear_res.weight"), f);
      L.linear_2 = tensor_from_file(file, n::interaction(t, "linear_2.weight"), f);
      L.alpha = tensor_from_file(file, n::interaction(t, "alpha"), f).reshape({});
      L.beta = tensor_from_file(file, n::interaction(t, "beta"), f).reshape({});
    } else {
      L.linear = tensor_from_file(file, n::interaction(t, "linear.weight"), f);
      if (L.density) L.density_weight = tensor_from_file(file, n::interaction(t, "density_fn.layer0.weight"), f);
      for (std::size_t k = 0; k <= c.radial_mlp.size(); ++k)
        L.radial_layers.push_back(tensor_from_file(file, n::radial_mlp_layer(t, k), f));
    }
    const int nu_max = c.correlation[t];
    for (std::size_t o = 0; o < L.out.size(); ++o) {
      ContractionWeights cw;
      cw.l_out = L.out[o].ir.l;
      for (int nu = 1; nu <= nu_max; ++nu) {
        cw.U.push_back(tensor_from_file(file, n::sc_coupling(t, o, nu), f));
        cw.weights.push_back(tensor_from_file(file, n::sc_weights(t, o, nu, nu_max), f));
      }
      L.contractions.push_back(cw);
    }
    L.product_linear = tensor_from_file(file, n::product(t, "linear.weight"), f);
    if (t < c.num_interactions - 1)
      L.readout = {tensor_from_file(file, n::readout(t, "linear.weight"), f)};
    else
      L.readout = {tensor_from_file(file, n::readout(t, "linear_1.weight"), f),
                   tensor_from_file(file, n::readout(t, "linear_2.weight"), f)};
    m.layers.push_back(std::move(L));
  }
  return m;
}

}  // namespace flashmace
