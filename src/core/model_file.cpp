#include "core/model_file.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "core/mace_tensor_names.h"

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
  namespace n = mace_tensors;
  e[n::kAtomicNumbers] = {{Z}, ExpectedTensor::Integer};
  e[n::kNodeEmbedding] = {{Z * C}};
  e[n::kBesselWeights] = {{nb}};
  const int64_t H = c.num_heads();
  e[n::kAtomicEnergies] = H == 1 ? ExpectedTensor{{Z}} : ExpectedTensor{{H, Z}};
  int64_t embedded = 0;
  for (const auto& s : c.system_embeddings) {
    const int64_t E = s.emb_dim;
    embedded += E;
    if (s.type == "categorical") {
      e[n::system_embedder(s.name, "weight")] = {{s.num_classes, E}};
    } else {
      e[n::system_embedder(s.name, "0.weight")] = {{E, 1}};
      e[n::system_embedder(s.name, "2.weight")] = {{E, E}};
      if (s.use_bias) {
        e[n::system_embedder(s.name, "0.bias")] = {{E}};
        e[n::system_embedder(s.name, "2.bias")] = {{E}};
      }
    }
  }
  if (embedded > 0) e[n::kSystemProjection] = {{C, embedded}};
  if (c.embedding_readout) e[n::kEmbeddingReadout] = {{C * H}};
  if (c.distance_transform == "Agnesi") {
    for (const char* k : {"q", "p", "a"}) e[n::distance_transform(k)] = {{}};
    e[n::distance_transform("covalent_radii")] = {{-1}};
  } else if (c.distance_transform == "Soft") {
    e[n::distance_transform("alpha")] = {{}};
    e[n::distance_transform("covalent_radii")] = {{-1}};
  }
  if (c.pair_repulsion) {
    e[n::pair_repulsion("c")] = {{4}};
    e[n::pair_repulsion("covalent_radii")] = {{-1}};
    e[n::pair_repulsion("a_exp")] = {{}};
    e[n::pair_repulsion("a_prefactor")] = {{}};
  }
  for (int t = 0; t < c.num_interactions; ++t) {
    const Irreps in = c.layer_input(t), out = c.layer_output(t), edge = c.layer_edge_irreps(t);
    const ConvTPLayout tp = conv_tp_layout(edge, sh, target);
    e[n::interaction(t, "linear_up.weight")] = {{linear_numel(in, edge)}};
    std::vector<int64_t> widths = {nb};
    for (int w : c.radial_mlp) widths.push_back(w);
    widths.push_back(tp.weight_numel);
    if (c.nonlinear(t)) {
      // torch.nn Linear [out, in] + bias, then LayerNorm (weight, bias) on every hidden layer; the
      // input is the radial features beside the sender's and the receiver's species embedding.
      widths.front() = nb + 2 * C;
      for (std::size_t k = 0; k + 1 < widths.size(); ++k) {
        e[n::interaction_mlp(t, "conv_tp_weights", 3 * k, "weight")] = {{widths[k + 1], widths[k]}};
        e[n::interaction_mlp(t, "conv_tp_weights", 3 * k, "bias")] = {{widths[k + 1]}};
        if (k + 2 < widths.size())
          for (const char* w : {"weight", "bias"}) e[n::interaction_mlp(t, "conv_tp_weights", 3 * k + 1, w)] = {{widths[k + 1]}};
      }
      e[n::interaction_mlp(t, "density_fn", 0, "weight")] = {{-1, nb + 2 * C}};
      e[n::interaction_mlp(t, "density_fn", 0, "bias")] = {{-1}};
      e[n::interaction_mlp(t, "density_fn", 1, "weight")] = {{-1}};
      e[n::interaction_mlp(t, "density_fn", 1, "bias")] = {{-1}};
      e[n::interaction_mlp(t, "density_fn", 3, "weight")] = {{1, -1}};
      e[n::interaction_mlp(t, "density_fn", 3, "bias")] = {{1}};
      for (const char* w : {"source_embedding.weight", "target_embedding.weight"}) e[n::interaction(t, w)] = {{Z * C}};
      const Irreps gate = c.gate_input();
      e[n::interaction(t, "linear_res.weight")] = {{linear_numel(edge, gate)}};
      e[n::interaction(t, "linear_1.weight")] = {{linear_numel(tp.mid, gate)}};
      e[n::interaction(t, "linear_2.weight")] = {{linear_numel(target, target)}};
      e[n::interaction(t, "skip_tp.weight")] = {{linear_numel(in, out)}};
      for (const char* w : {"alpha", "beta"}) e[n::interaction(t, w)] = {{}};
    } else {
      for (std::size_t k = 0; k + 1 < widths.size(); ++k)
        e[n::radial_mlp_layer(t, k)] = {{widths[k], widths[k + 1]}};
      e[n::interaction(t, "linear.weight")] = {{linear_numel(tp.mid, target)}};
      e[n::interaction(t, "skip_tp.weight")] = {
          {c.residual(t) ? linear_numel(in, out) * Z : linear_numel(target, target) * Z}};
      if (c.density(t)) e[n::interaction(t, "density_fn.layer0.weight")] = {{nb, 1}};
    }

    const int nu_max = c.correlation[t];
    for (std::size_t o = 0; o < out.size(); ++o) {
      const int L = out[o].ir.l;
      for (int nu = 1; nu <= nu_max; ++nu) {
        std::vector<int64_t> shape;
        if (L > 0) shape.push_back(2 * L + 1);
        for (int i = 0; i < nu; ++i) shape.push_back(K);
        shape.push_back(-1);
        e[n::sc_coupling(t, o, nu)] = {shape};
        e[n::sc_weights(t, o, nu, nu_max)] = {{c.sc_elements(), -1, C}};
      }
    }
    e[n::product(t, "linear.weight")] = {{linear_numel(out, out)}};
    // (one output per head; the last readout's hidden layer holds one MLP_irreps block per head)
    if (t < c.num_interactions - 1) {
      e[n::readout(t, "linear.weight")] = {{C * H}};
    } else {
      const int64_t mlp = Irreps::parse(c.mlp_irreps).dim() * H;
      e[n::readout(t, "linear_1.weight")] = {{C * mlp}};
      e[n::readout(t, "linear_2.weight")] = {{mlp * H}};
    }
  }
  return e;
}

namespace {

// Each check below throws flashmace::Error starting with `where` ("Model file <path>: ").

void check_dtype_and_shape(const SafetensorsFile& file, const std::string& key, const ExpectedTensor& expected,
                           const std::string& model_dtype, const std::string& where) {
  if (!file.has(key)) throw Error(where + "missing tensor '" + key + "' required by the model's hyperparameters");
  const TensorView& t = file.tensor(key);
  const std::string tw = where + "tensor '" + key + "' ";
  const DType float_dtype = model_dtype == "float64" ? DType::F64 : DType::F32;
  if (expected.kind == ExpectedTensor::Float && t.dtype != float_dtype)
    throw Error(tw + "has dtype " + dtype_name(t.dtype) + ", expected " + dtype_name(float_dtype) +
                " (the model dtype is " + model_dtype + ")");
  if (expected.kind == ExpectedTensor::Integer && !is_integer(t.dtype))
    throw Error(tw + "has dtype " + dtype_name(t.dtype) + ", expected an integer dtype");
  bool ok = t.shape.size() == expected.shape.size();
  for (std::size_t i = 0; ok && i < t.shape.size(); ++i) ok = expected.shape[i] < 0 || expected.shape[i] == t.shape[i];
  // Scalars may be stored as [] or [1].
  if (!ok && expected.shape.empty() && t.numel() == 1) ok = true;
  if (!ok) throw Error(tw + "has shape " + shape_str(t.shape) + ", expected " + shape_str(expected.shape));
  if (expected.kind == ExpectedTensor::Float && !is_float(t.dtype)) throw Error(tw + "must be a float tensor");
}

// The element list in the metadata and in the tensors must agree.
void check_element_list(const SafetensorsFile& file, const MaceConfig& config, const std::string& where) {
  const std::vector<double> z = file.to_doubles(mace_tensors::kAtomicNumbers);
  for (std::size_t i = 0; i < z.size(); ++i)
    if (z[i] != static_cast<double>(config.atomic_numbers[i]))  // (no int cast: any value may be stored)
      throw Error(where + "tensor 'atomic_numbers' disagrees with the metadata's atomic_numbers");
}

// SC weights must match the number of coupling paths of their U tensor.
void check_sc_paths(const SafetensorsFile& file, const MaceConfig& config, const std::string& where) {
  for (int t = 0; t < config.num_interactions; ++t) {
    const Irreps out = config.layer_output(t);
    const int nu_max = config.correlation[t];
    for (std::size_t o = 0; o < out.size(); ++o) {
      for (int nu = 1; nu <= nu_max; ++nu) {
        const std::string wkey = mace_tensors::sc_weights(t, o, nu, nu_max), ukey = mace_tensors::sc_coupling(t, o, nu);
        const int64_t paths = file.tensor(ukey).shape.back();
        if (file.tensor(wkey).shape[1] != paths)
          throw Error(where + "tensor '" + wkey + "' has " + std::to_string(file.tensor(wkey).shape[1]) +
                      " coupling paths but '" + ukey + "' has " + std::to_string(paths));
      }
    }
  }
}

std::string non_finite_name(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

// A NaN or Inf weight loads without complaint and turns every energy into nan; refuse it here, where
// the message can name the tensor. One pass over one tensor's values at a time.
void check_finite(const SafetensorsFile& file, const std::string& key, const std::string& where) {
  const std::vector<double> values = file.to_doubles(key);
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]) && bad++ == 0) first = i;
  if (bad == 0) return;
  const std::string how_many =
      bad == 1 ? "the only non-finite value" : "the first of " + std::to_string(bad) + " non-finite values";
  throw Error(where + "tensor '" + key + "' holds " + non_finite_name(values[first]) + " at flat index " +
              std::to_string(first) + ", " + how_many + " among " + std::to_string(values.size()) +
              " (a broken export or training run: re-export the model, or check the checkpoint)");
}

// The shortest decimal that reads back as `v` at the stored precision, so that the message shows
// numbers as the JSON and the exporter's log spell them.
std::string shortest(double v, bool as_float) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    const double back = std::strtod(text, nullptr);
    if (as_float ? static_cast<float>(back) == static_cast<float>(v) : back == v) break;
  }
  return text;
}

// The metadata's E0 as the tensor stores it: a float32 model holds the float64 value rounded to the
// nearest float. A value beyond the float range agrees with no tensor (and converting it is undefined).
bool e0_agrees(double meta, double tensor, bool f32) {
  if (!f32) return meta == tensor;
  if (!(std::fabs(meta) <= std::numeric_limits<float>::max())) return false;
  return static_cast<double>(static_cast<float>(meta)) == tensor;
}

// The engine adds the E0 tensor, but reports (the interaction energy) subtract the metadata's
// atomic_energies; the exporter writes both from the same numbers.
void check_atomic_energies(const SafetensorsFile& file, const MaceConfig& config, const std::string& where) {
  const std::vector<double> tensor = file.to_doubles(mace_tensors::kAtomicEnergies);
  const bool f32 = config.dtype == "float32";
  for (std::size_t i = 0; i < tensor.size(); ++i) {
    const double meta = config.atomic_energies[i];
    if (e0_agrees(meta, tensor[i], f32)) continue;
    const int z = config.atomic_numbers[i % config.atomic_numbers.size()];
    const std::string head =
        config.num_heads() > 1 ? " of head '" + config.heads[i / config.atomic_numbers.size()] + "'" : "";
    throw Error(where + "tensor '" + mace_tensors::kAtomicEnergies + "' holds E0 = " + shortest(tensor[i], f32) +
                " for " + element_symbol(z) + " (Z = " + std::to_string(z) + ")" + head +
                " but the metadata's atomic_energies hold " + shortest(meta, false) +
                "; the two must agree (the engine uses the tensor, the exporter writes both): "
                "re-export the model with tools/export_mace.py");
  }
}

}  // namespace

ModelFile ModelFile::load(const std::string& path) { return from_safetensors(SafetensorsFile::load(path)); }

ModelFile ModelFile::from_safetensors(SafetensorsFile file) {
  ModelFile m;
  const std::string where = "Model file " + file.path() + ": ";
  auto meta = file.metadata().find(kMetadataKey);
  if (meta == file.metadata().end())
    throw Error(where + "no '" + kMetadataKey +
                "' metadata; this is not a flashmace model (convert MACE models with tools/export_mace.py)");
  m.config_ = parse_mace_config(meta->second, file.path());

  const std::map<std::string, ExpectedTensor> expected = expected_tensors(m.config_);
  for (const auto& [key, e] : expected) check_dtype_and_shape(file, key, e, m.config_.dtype, where);
  check_element_list(file, m.config_, where);
  check_sc_paths(file, m.config_, where);
  // Values last: every tensor is now known to exist with its expected dtype and shape.
  for (const auto& [key, e] : expected)
    if (e.kind == ExpectedTensor::Float) check_finite(file, key, where);
  check_atomic_energies(file, m.config_, where);
  m.file_ = std::move(file);
  return m;
}

namespace {

// The entries of a [rows, cols] row-major float tensor at rows [r0, r0 + nr) and columns [c0, c0 + nc),
// times `factor`, as a tensor of `shape`.
template <typename T>
TensorBytes block_of(const TensorView& v, int64_t cols, int64_t r0, int64_t nr, int64_t c0, int64_t nc, double factor,
                     std::vector<int64_t> shape) {
  TensorBytes out{v.dtype, std::move(shape), std::vector<unsigned char>(static_cast<std::size_t>(nr * nc) * sizeof(T))};
  const T* in = reinterpret_cast<const T*>(v.data);
  T* o = reinterpret_cast<T*>(out.bytes.data());
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t c = 0; c < nc; ++c) o[r * nc + c] = static_cast<T>(in[(r0 + r) * cols + c0 + c] * factor);
  return out;
}

TensorBytes block(const TensorView& v, int64_t cols, int64_t r0, int64_t nr, int64_t c0, int64_t nc, double factor,
                  std::vector<int64_t> shape) {
  return v.dtype == DType::F64 ? block_of<double>(v, cols, r0, nr, c0, nc, factor, std::move(shape))
                               : block_of<float>(v, cols, r0, nr, c0, nc, factor, std::move(shape));
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

}  // namespace

ModelFile ModelFile::select_head(const std::string& name) const {
  const MaceConfig& c = config_;
  const std::string head = name.empty() ? c.default_head() : name;
  if (head.empty())
    throw Error("Model file " + path() + " has " + std::to_string(c.num_heads()) + " heads (" + joined(c.heads) +
                ") and none named 'default': choose one (pair_style mace/flash ... head NAME, --head NAME)");
  const int h = c.head_index(head);
  if (h < 0) {
    const std::string fallback = c.default_head();
    throw Error("Model file " + path() + " has no head '" + head + "'; its heads: " + joined(c.heads) +
                (fallback.empty() ? std::string() : " (the default, used when none is named: '" + fallback + "')"));
  }
  if (c.num_heads() == 1) return *this;
  const int64_t H = c.num_heads(), Z = c.num_elements(), C = c.channels(), M = Irreps::parse(c.mlp_irreps).dim();
  MaceConfig one = c;
  one.heads = {head};
  one.scale = {c.scale[h]};
  one.shift = {c.shift[h]};
  one.atomic_energies.assign(c.atomic_energies.begin() + h * Z, c.atomic_energies.begin() + (h + 1) * Z);

  std::map<std::string, TensorBytes> tensors;
  for (const auto& key : file_.names()) {
    const TensorView& v = file_.tensor(key);
    tensors[key] = TensorBytes{v.dtype, v.shape, std::vector<unsigned char>(v.data, v.data + v.nbytes)};
  }
  namespace n = mace_tensors;
  tensors[n::kAtomicEnergies] = block(tensor(n::kAtomicEnergies), Z, h, 1, 0, Z, 1.0, {Z});
  const int last = c.num_interactions - 1;
  for (int t = 0; t < last; ++t) {
    const std::string key = n::readout(t, "linear.weight");
    tensors[key] = block(tensor(key), H, 0, C, h, 1, 1.0, {C});
  }
  const std::string l1 = n::readout(last, "linear_1.weight"), l2 = n::readout(last, "linear_2.weight");
  tensors[l1] = block(tensor(l1), M * H, 0, C, h * M, M, 1.0, {C * M});
  tensors[l2] = block(tensor(l2), H, h * M, M, h, 1, 1.0 / std::sqrt(static_cast<double>(H)), {M});

  std::map<std::string, std::string> metadata = file_.metadata();
  metadata[kMetadataKey] = mace_config_to_json(one);
  return from_safetensors(
      SafetensorsFile::parse(serialize_safetensors(metadata, tensors), path() + " (head '" + head + "')"));
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
