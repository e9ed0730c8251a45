#include "core/model_file.h"

#include "core/error.h"

namespace flashmace {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + (shape[i] < 0 ? std::string("*") : std::to_string(shape[i]));
  return s + "]";
}

int64_t linear_numel(const Irreps& in, const Irreps& out) {
  int64_t n = 0;
  for (const auto& a : in.blocks())
    for (const auto& b : out.blocks())
      if (a.ir == b.ir) n += static_cast<int64_t>(a.mul) * b.mul;
  return n;
}

bool is_float(DType d) { return d == DType::F64 || d == DType::F32; }
bool is_integer(DType d) {
  return d == DType::I64 || d == DType::I32 || d == DType::I16 || d == DType::I8 || d == DType::U8;
}

}  // namespace

std::map<std::string, ExpectedTensor> expected_tensors(const MaceConfig& c) {
  std::map<std::string, ExpectedTensor> e;
  const int64_t Z = c.num_elements(), C = c.channels(), nb = c.num_bessel;
  const Irreps sh = c.sh_irreps(), target = c.interaction_target();
  const int64_t K = sh.dim();
  e["atomic_numbers"] = {{Z}, ExpectedTensor::Integer};
  e["node_embedding.linear.weight"] = {{Z * C}};
  e["radial_embedding.bessel_fn.bessel_weights"] = {{nb}};
  e["atomic_energies_fn.atomic_energies"] = {{Z}};
  if (c.distance_transform == "Agnesi") {
    for (const char* k : {"q", "p", "a"}) e[std::string("radial_embedding.distance_transform.") + k] = {{}};
    e["radial_embedding.distance_transform.covalent_radii"] = {{-1}};
  } else if (c.distance_transform == "Soft") {
    e["radial_embedding.distance_transform.alpha"] = {{}};
    e["radial_embedding.distance_transform.covalent_radii"] = {{-1}};
  }
  if (c.pair_repulsion) {
    e["pair_repulsion_fn.c"] = {{4}};
    e["pair_repulsion_fn.covalent_radii"] = {{-1}};
    e["pair_repulsion_fn.a_exp"] = {{}};
    e["pair_repulsion_fn.a_prefactor"] = {{}};
  }
  for (int t = 0; t < c.num_interactions; ++t) {
    const std::string it = "interactions." + std::to_string(t) + ".";
    const Irreps in = c.layer_input(t), out = c.layer_output(t);
    const ConvTPLayout tp = conv_tp_layout(in, sh, target);
    e[it + "linear_up.weight"] = {{linear_numel(in, in)}};
    std::vector<int64_t> widths = {nb};
    for (int w : c.radial_mlp) widths.push_back(w);
    widths.push_back(tp.weight_numel);
    for (std::size_t k = 0; k + 1 < widths.size(); ++k)
      e[it + "conv_tp_weights.layer" + std::to_string(k) + ".weight"] = {{widths[k], widths[k + 1]}};
    e[it + "linear.weight"] = {{linear_numel(tp.mid, target)}};
    e[it + "skip_tp.weight"] = {{c.residual(t) ? linear_numel(in, out) * Z : linear_numel(target, target) * Z}};
    if (c.density(t)) e[it + "density_fn.layer0.weight"] = {{nb, 1}};

    const std::string pr = "products." + std::to_string(t) + ".";
    const int nu_max = c.correlation[t];
    for (std::size_t o = 0; o < out.size(); ++o) {
      const std::string sc = pr + "symmetric_contractions.contractions." + std::to_string(o) + ".";
      const int L = out[o].ir.l;
      for (int nu = 1; nu <= nu_max; ++nu) {
        std::vector<int64_t> shape;
        if (L > 0) shape.push_back(2 * L + 1);
        for (int i = 0; i < nu; ++i) shape.push_back(K);
        shape.push_back(-1);
        e[sc + "U_matrix_" + std::to_string(nu)] = {shape};
      }
      e[sc + "weights_max"] = {{Z, -1, C}};
      for (int j = 0; j < nu_max - 1; ++j) e[sc + "weights." + std::to_string(j)] = {{Z, -1, C}};
    }
    e[pr + "linear.weight"] = {{linear_numel(out, out)}};
    const std::string ro = "readouts." + std::to_string(t) + ".";
    if (t < c.num_interactions - 1) {
      e[ro + "linear.weight"] = {{C}};
    } else {
      const int64_t mlp = Irreps::parse(c.mlp_irreps).dim();
      e[ro + "linear_1.weight"] = {{C * mlp}};
      e[ro + "linear_2.weight"] = {{mlp}};
    }
  }
  return e;
}

ModelFile ModelFile::load(const std::string& path) { return from_safetensors(SafetensorsFile::load(path)); }

ModelFile ModelFile::from_safetensors(SafetensorsFile file) {
  ModelFile m;
  const std::string where = "Model file " + file.path() + ": ";
  auto meta = file.metadata().find(kMetadataKey);
  if (meta == file.metadata().end())
    throw Error(where + "no '" + kMetadataKey +
                "' metadata; this is not a flashmace model (convert MACE models with tools/export_mace.py)");
  m.config_ = parse_mace_config(meta->second, file.path());
  const DType float_dtype = m.config_.dtype == "float64" ? DType::F64 : DType::F32;

  for (const auto& [key, expected] : expected_tensors(m.config_)) {
    if (!file.has(key)) throw Error(where + "missing tensor '" + key + "' required by the model's hyperparameters");
    const TensorView& t = file.tensor(key);
    const std::string tw = where + "tensor '" + key + "' ";
    if (expected.kind == ExpectedTensor::Float && t.dtype != float_dtype)
      throw Error(tw + "has dtype " + dtype_name(t.dtype) + ", expected " + dtype_name(float_dtype) +
                  " (the model dtype is " + m.config_.dtype + ")");
    if (expected.kind == ExpectedTensor::Integer && !is_integer(t.dtype))
      throw Error(tw + "has dtype " + dtype_name(t.dtype) + ", expected an integer dtype");
    bool ok = t.shape.size() == expected.shape.size();
    for (std::size_t i = 0; ok && i < t.shape.size(); ++i)
      ok = expected.shape[i] < 0 || expected.shape[i] == t.shape[i];
    // Scalars may be stored as [] or [1].
    if (!ok && expected.shape.empty() && t.numel() == 1) ok = true;
    if (!ok) throw Error(tw + "has shape " + shape_str(t.shape) + ", expected " + shape_str(expected.shape));
    if (expected.kind == ExpectedTensor::Float && !is_float(t.dtype)) throw Error(tw + "must be a float tensor");
  }
  // The element list in the metadata and in the tensors must agree.
  const std::vector<double> z = file.to_doubles("atomic_numbers");
  for (std::size_t i = 0; i < z.size(); ++i)
    if (z[i] != static_cast<double>(m.config_.atomic_numbers[i]))  // (no int cast: any value may be stored)
      throw Error(where + "tensor 'atomic_numbers' disagrees with the metadata's atomic_numbers");
  // SC weights must match the number of coupling paths of their U tensor.
  for (int t = 0; t < m.config_.num_interactions; ++t) {
    const Irreps out = m.config_.layer_output(t);
    const int nu_max = m.config_.correlation[t];
    for (std::size_t o = 0; o < out.size(); ++o) {
      const std::string sc =
          "products." + std::to_string(t) + ".symmetric_contractions.contractions." + std::to_string(o) + ".";
      for (int nu = 1; nu <= nu_max; ++nu) {
        const std::string wkey = nu == nu_max ? sc + "weights_max" : sc + "weights." + std::to_string(nu_max - 1 - nu);
        const int64_t paths = file.tensor(sc + "U_matrix_" + std::to_string(nu)).shape.back();
        if (file.tensor(wkey).shape[1] != paths)
          throw Error(where + "tensor '" + wkey + "' has " + std::to_string(file.tensor(wkey).shape[1]) +
                      " coupling paths but '" + sc + "U_matrix_" + std::to_string(nu) + "' has " +
                      std::to_string(paths));
      }
    }
  }
  m.file_ = std::move(file);
  return m;
}

void ModelFile::save(const std::string& path) const {
  std::map<std::string, TensorBytes> tensors;
  for (const auto& name : file_.names()) {
    const TensorView& v = file_.tensor(name);
    tensors[name] = TensorBytes{v.dtype, v.shape, std::vector<unsigned char>(v.data, v.data + v.nbytes)};
  }
  write_safetensors(path, file_.metadata(), tensors);
}

}  // namespace flashmace
