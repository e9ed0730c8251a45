#include "core/system_inputs.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/mace_tensor_names.h"

namespace flashmace {

namespace {

double silu(double x) { return x / (1.0 + std::exp(-x)); }

std::string number(double v) {
  char s[32];
  std::snprintf(s, sizeof(s), "%g", v);
  return s;
}

// Doubles stored in the dtype of `like` (F64 or F32), in shape `shape`.
TensorBytes bytes_like(const TensorView& like, const std::vector<double>& values, std::vector<int64_t> shape) {
  TensorBytes out{like.dtype, std::move(shape), {}};
  if (like.dtype == DType::F64) {
    out.bytes.resize(values.size() * sizeof(double));
    std::memcpy(out.bytes.data(), values.data(), out.bytes.size());
  } else {
    std::vector<float> f(values.begin(), values.end());
    out.bytes.resize(f.size() * sizeof(float));
    std::memcpy(out.bytes.data(), f.data(), out.bytes.size());
  }
  return out;
}

// One embedder's output for value v (mace-torch's GenericJointEmbedding per feature).
std::vector<double> embed(const ModelFile& file, const MaceConfig::SystemEmbedding& s, double v) {
  namespace n = mace_tensors;
  const SafetensorsFile& f = file.file();
  const int E = s.emb_dim;
  if (s.type == "categorical") {
    // (mace-torch: (value + offset).long(), a row of the table)
    const double k = v + s.offset;
    if (k != std::floor(k) || k < 0 || k >= s.num_classes)
      throw Error("Model file " + file.path() + ": " + s.name + " " + number(v) + " is not one of its values (the " +
                  "integers " + std::to_string(-s.offset) + " to " + std::to_string(s.num_classes - 1 - s.offset) + ")");
    const std::vector<double> table = f.to_doubles(n::system_embedder(s.name, "weight"));
    const auto row = table.begin() + static_cast<std::ptrdiff_t>(k) * E;
    return {row, row + E};
  }
  // Linear(1, E) -> SiLU -> Linear(E, E)
  const std::vector<double> w0 = f.to_doubles(n::system_embedder(s.name, "0.weight"));
  const std::vector<double> w2 = f.to_doubles(n::system_embedder(s.name, "2.weight"));
  const std::vector<double> b0 = s.use_bias ? f.to_doubles(n::system_embedder(s.name, "0.bias")) : std::vector<double>(E);
  const std::vector<double> b2 = s.use_bias ? f.to_doubles(n::system_embedder(s.name, "2.bias")) : std::vector<double>(E);
  std::vector<double> hidden(E), out(E);
  for (int i = 0; i < E; ++i) hidden[i] = silu(w0[i] * v + b0[i]);
  for (int j = 0; j < E; ++j) {
    double sum = b2[j];
    for (int i = 0; i < E; ++i) sum += w2[j * E + i] * hidden[i];
    out[j] = sum;
  }
  return out;
}

}  // namespace

double system_input(const SystemInputs& given, const std::string& name) {
  const auto it = given.find(name);
  if (it != given.end()) return it->second;
  return name == "total_spin" ? 1.0 : 0.0;
}

ModelFile fold_system_inputs(const ModelFile& file, const SystemInputs& given, std::string* summary) {
  const MaceConfig& c = file.config();
  std::string reads;
  for (const auto& s : c.system_embeddings) reads += (reads.empty() ? "" : ", ") + s.name;
  for (const auto& [name, value] : given) {
    bool read = false;
    for (const auto& s : c.system_embeddings) read = read || s.name == name;
    if (!read)
      throw Error("Model file " + file.path() + " does not read " + name + " (its per-structure inputs: " +
                  (reads.empty() ? std::string("none") : reads) + "); drop the " +
                  (name == "total_charge" ? "charge" : name == "total_spin" ? "spin" : name) + " keyword");
  }
  if (summary) summary->clear();
  if (c.system_embeddings.empty()) return file;

  namespace n = mace_tensors;
  // The embeddings side by side, then SiLU(P x) [C] (GenericJointEmbedding.project, no bias).
  std::vector<double> x;
  for (const auto& s : c.system_embeddings) {
    const double v = system_input(given, s.name);
    const std::vector<double> e = embed(file, s, v);
    x.insert(x.end(), e.begin(), e.end());
    if (summary)
      *summary += (summary->empty() ? "" : ", ") + s.name + " " + number(v) + (given.count(s.name) ? "" : " (default)");
  }
  const int64_t C = c.channels(), Z = c.num_elements(), H = c.num_heads(), X = static_cast<int64_t>(x.size());
  const std::vector<double> P = file.file().to_doubles(n::kSystemProjection);
  std::vector<double> J(C);
  for (int64_t i = 0; i < C; ++i) {
    double sum = 0;
    for (int64_t k = 0; k < X; ++k) sum += P[i * X + k] * x[k];
    J[i] = silu(sum);
  }
  // Node features are node_embedding rows / sqrt(Z) (e3nn's fan-in), plus J.
  std::vector<double> node = file.file().to_doubles(n::kNodeEmbedding);
  const double sqrt_z = std::sqrt(static_cast<double>(Z));
  for (int64_t z = 0; z < Z; ++z)
    for (int64_t i = 0; i < C; ++i) node[z * C + i] += sqrt_z * J[i];
  MaceConfig folded = c;
  folded.system_embeddings.clear();
  folded.embedding_readout = false;
  if (c.embedding_readout) {
    // e3nn Linear C x 0e -> H x 0e on the embedded features: per element and head, added to E0.
    const std::vector<double> w = file.file().to_doubles(n::kEmbeddingReadout);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t z = 0; z < Z; ++z) {
        double e = 0;
        for (int64_t i = 0; i < C; ++i) e += node[z * C + i] / sqrt_z * w[i * H + h];
        folded.atomic_energies[h * Z + z] += e / std::sqrt(static_cast<double>(C));
      }
  }

  std::map<std::string, TensorBytes> tensors;
  for (const auto& key : file.file().names()) {
    if (key.rfind("joint_embedding.", 0) == 0 || key == n::kEmbeddingReadout) continue;
    const TensorView& v = file.tensor(key);
    tensors[key] = TensorBytes{v.dtype, v.shape, std::vector<unsigned char>(v.data, v.data + v.nbytes)};
  }
  const TensorView& nv = file.tensor(n::kNodeEmbedding);
  tensors[n::kNodeEmbedding] = bytes_like(nv, node, nv.shape);
  const TensorView& ev = file.tensor(n::kAtomicEnergies);
  tensors[n::kAtomicEnergies] = bytes_like(ev, folded.atomic_energies, ev.shape);
  std::map<std::string, std::string> metadata = file.file().metadata();
  metadata[kMetadataKey] = mace_config_to_json(folded);
  return ModelFile::from_safetensors(SafetensorsFile::parse(serialize_safetensors(metadata, tensors),
                                                            file.path() + " (" + (summary ? *summary : reads) + ")"));
}

}  // namespace flashmace
