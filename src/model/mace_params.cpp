#include "model/mace_params.h"

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

  m.atomic_numbers = tensor_from_file(file, "atomic_numbers", i64);
  m.node_embedding = tensor_from_file(file, "node_embedding.linear.weight", f).reshape({Z, C});
  m.atomic_energies = tensor_from_file(file, "atomic_energies_fn.atomic_energies", f);
  m.atomic_energies_f64 = tensor_from_file(file, "atomic_energies_fn.atomic_energies", f.dtype(at::kDouble));
  m.bessel_weights = tensor_from_file(file, "radial_embedding.bessel_fn.bessel_weights", f);
  m.r_max = at::scalar_tensor(c.r_max, f);
  m.cutoff_p = c.num_polynomial_cutoff;
  const std::string dt = "radial_embedding.distance_transform.";
  if (c.distance_transform == "Agnesi") {
    m.transform_q = tensor_from_file(file, dt + "q", f).reshape({});
    m.transform_p = tensor_from_file(file, dt + "p", f).reshape({});
    m.transform_a = tensor_from_file(file, dt + "a", f).reshape({});
    m.transform_covalent_radii = tensor_from_file(file, dt + "covalent_radii", f);
  } else if (c.distance_transform == "Soft") {
    m.transform_alpha = tensor_from_file(file, dt + "alpha", f).reshape({});
    m.transform_covalent_radii = tensor_from_file(file, dt + "covalent_radii", f);
  }
  m.zbl = c.pair_repulsion;
  if (m.zbl) {
    m.zbl_params.c = tensor_from_file(file, "pair_repulsion_fn.c", f);
    m.zbl_params.covalent_radii = tensor_from_file(file, "pair_repulsion_fn.covalent_radii", f);
    m.zbl_params.a_exp = tensor_from_file(file, "pair_repulsion_fn.a_exp", f).reshape({});
    m.zbl_params.a_prefactor = tensor_from_file(file, "pair_repulsion_fn.a_prefactor", f).reshape({});
    m.zbl_params.p = file.has("pair_repulsion_fn.p")
                         ? static_cast<int>(file.file().to_doubles("pair_repulsion_fn.p")[0])
                         : c.num_polynomial_cutoff;
  }

  const Irreps target = c.interaction_target();
  for (int t = 0; t < c.num_interactions; ++t) {
    InteractionParams L;
    const std::string it = "interactions." + std::to_string(t) + ".";
    const std::string pr = "products." + std::to_string(t) + ".";
    L.in = c.layer_input(t);
    L.out = c.layer_output(t);
    L.target = target;
    L.tp = conv_tp_layout(L.in, m.sh, target);
    for (const auto& p : L.tp.paths) {
      const int l1 = L.in[p.i1].ir.l, l2 = m.sh[p.i2].ir.l, l3 = L.tp.mid[p.k].ir.l;
      L.tp_w3j.push_back(at::tensor(wigner_3j(l1, l2, l3), at::TensorOptions().dtype(at::kDouble))
                             .reshape({2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1})
                             .to(f));
    }
    L.residual = c.residual(t);
    L.density = c.density(t);
    L.avg_num_neighbors = c.avg_num_neighbors[t];
    L.linear_up = tensor_from_file(file, it + "linear_up.weight", f);
    L.linear = tensor_from_file(file, it + "linear.weight", f);
    L.skip_tp = tensor_from_file(file, it + "skip_tp.weight", f);
    if (L.density) L.density_weight = tensor_from_file(file, it + "density_fn.layer0.weight", f);
    for (std::size_t k = 0; k <= c.radial_mlp.size(); ++k)
      L.radial_layers.push_back(
          tensor_from_file(file, it + "conv_tp_weights.layer" + std::to_string(k) + ".weight", f));
    const int nu_max = c.correlation[t];
    for (std::size_t o = 0; o < L.out.size(); ++o) {
      const std::string sc = pr + "symmetric_contractions.contractions." + std::to_string(o) + ".";
      ContractionWeights cw;
      cw.l_out = L.out[o].ir.l;
      for (int nu = 1; nu <= nu_max; ++nu) {
        cw.U.push_back(tensor_from_file(file, sc + "U_matrix_" + std::to_string(nu), f));
        // mace_spec.md 7.2: weights.j holds order nu = nu_max - 1 - j; weights_max holds nu_max.
        const std::string wkey = nu == nu_max ? sc + "weights_max" : sc + "weights." + std::to_string(nu_max - 1 - nu);
        cw.weights.push_back(tensor_from_file(file, wkey, f));
      }
      L.contractions.push_back(cw);
    }
    L.product_linear = tensor_from_file(file, pr + "linear.weight", f);
    const std::string ro = "readouts." + std::to_string(t) + ".";
    if (t < c.num_interactions - 1)
      L.readout = {tensor_from_file(file, ro + "linear.weight", f)};
    else
      L.readout = {tensor_from_file(file, ro + "linear_1.weight", f),
                   tensor_from_file(file, ro + "linear_2.weight", f)};
    m.layers.push_back(std::move(L));
  }
  return m;
}

}  // namespace flashmace
