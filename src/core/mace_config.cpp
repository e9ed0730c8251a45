#include "core/mace_config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace flashmace {

namespace {

constexpr const char* kSymbols[] = {
    "",   "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si", "P",  "S",
    "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As",
    "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn",
    "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr", "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho",
    "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W",  "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po",
    "At", "Rn", "Fr", "Ra", "Ac", "Th", "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md",
    "No", "Lr", "Rf", "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og"};

const std::vector<std::string> kInteractionClasses = {
    "RealAgnosticInteractionBlock", "RealAgnosticResidualInteractionBlock", "RealAgnosticDensityInteractionBlock",
    "RealAgnosticDensityResidualInteractionBlock", "RealAgnosticResidualNonLinearInteractionBlock"};

using json = nlohmann::json;

template <typename T>
T required(const json& doc, const char* key, const std::string& where) {
  if (!doc.contains(key)) throw Error(where + "metadata has no '" + key + "'");
  try {
    return doc.at(key).get<T>();
  } catch (const json::exception&) {
    throw Error(where + "metadata '" + key + "' has the wrong type: " + doc.at(key).dump());
  }
}

// A number (one head) or a list of one number per head.
std::vector<double> per_head(const json& doc, const char* key, std::size_t heads, const std::string& where) {
  if (doc.contains(key) && doc.at(key).is_number()) {
    if (heads != 1)
      throw Error(where + "metadata '" + key + "' needs one value per head (" + std::to_string(heads) + ")");
    return {doc.at(key).get<double>()};
  }
  const std::vector<double> v = required<std::vector<double>>(doc, key, where);
  if (v.size() != heads)
    throw Error(where + "metadata '" + key + "' has " + std::to_string(v.size()) + " values for " +
                std::to_string(heads) + " heads");
  return v;
}

std::string optional_string(const json& doc, const char* key, const std::string& fallback, const std::string& where) {
  if (!doc.contains(key) || doc.at(key).is_null()) return fallback;
  if (!doc.at(key).is_string()) throw Error(where + "metadata '" + key + "' must be a string or null");
  return doc.at(key).get<std::string>();
}

bool optional_bool(const json& doc, const char* key, bool fallback, const std::string& where) {
  if (!doc.contains(key) || doc.at(key).is_null()) return fallback;
  if (!doc.at(key).is_boolean()) throw Error(where + "metadata '" + key + "' must be true or false");
  return doc.at(key).get<bool>();
}

}  // namespace

int MaceConfig::channels() const {
  const Irreps h = hidden();
  for (const auto& b : h.blocks())
    if (b.ir == Irrep{0, 1}) return b.mul;
  return 0;
}

Irreps MaceConfig::interaction_target() const { return (sh_irreps() * channels()).sort().simplify(); }

Irreps MaceConfig::layer_input(int t) const { return t == 0 ? Irreps::scalars(channels()) : layer_output(t - 1); }

Irreps MaceConfig::layer_output(int t) const {
  return t < num_interactions - 1 ? hidden() : Irreps::scalars(channels());
}

Irreps MaceConfig::gate_input() const {
  std::vector<MulIr> scalars, gates, gated;
  const Irreps target = interaction_target();
  for (const auto& b : target.blocks()) {
    if (b.ir.l == 0) {
      scalars.push_back(b);
    } else {
      gates.push_back({b.mul, Irrep{0, 1}});
      gated.push_back(b);
    }
  }
  scalars.insert(scalars.end(), gates.begin(), gates.end());
  scalars.insert(scalars.end(), gated.begin(), gated.end());
  return Irreps(scalars).simplify();
}

Irreps MaceConfig::layer_edge_irreps(int t) const {
  if (edge_irreps.empty() || (t == 0 && !use_edge_irreps_first)) return layer_input(t);
  const Irreps e = Irreps::parse(edge_irreps);
  if (t > 0) return e;
  for (const auto& b : e.blocks())
    if (b.ir == Irrep{0, 1}) return Irreps::scalars(b.mul);
  return Irreps::scalars(0);
}

int MaceConfig::element_index(int atomic_number) const {
  auto it = std::find(atomic_numbers.begin(), atomic_numbers.end(), atomic_number);
  return it == atomic_numbers.end() ? -1 : static_cast<int>(it - atomic_numbers.begin());
}

namespace {

// metadata "system_embeddings" (docs/model-format.md "System embeddings"): per-structure inputs.
std::vector<MaceConfig::SystemEmbedding> parse_system_embeddings(const json& doc, const std::string& where) {
  std::vector<MaceConfig::SystemEmbedding> out;
  if (!doc.contains("system_embeddings") || doc["system_embeddings"].is_null()) return out;
  try {
    for (const json& e : doc["system_embeddings"]) {
      MaceConfig::SystemEmbedding s;
      s.name = e.at("name").get<std::string>();
      s.type = e.at("type").get<std::string>();
      s.emb_dim = e.at("emb_dim").get<int>();
      if (s.type == "categorical") {
        s.num_classes = e.at("num_classes").get<int>();
        s.offset = e.value("offset", 0);
      } else if (s.type == "continuous") {
        s.use_bias = e.value("use_bias", true);
      } else {
        throw Error(where + "system embedding '" + s.name + "' has type '" + s.type + "' (categorical or continuous)");
      }
      if (s.name != "total_charge" && s.name != "total_spin" && s.name != "elec_temp")
        throw Error(where + "system embedding '" + s.name + "' (known: total_charge, total_spin, elec_temp)");
      if (s.emb_dim < 1 || (s.type == "categorical" && s.num_classes < 1))
        throw Error(where + "system embedding '" + s.name + "' needs positive emb_dim (and num_classes)");
      out.push_back(s);
    }
  } catch (const json::exception& e) {
    throw Error(where + "bad 'system_embeddings' (" + e.what() + ")");
  }
  return out;
}

}  // namespace

MaceConfig parse_mace_config(const std::string& json_text, const std::string& where_file) {
  const std::string where = "Model file " + where_file + ": ";
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(where + "bad metadata JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) throw Error(where + "bad metadata JSON: not an object");
  if (required<std::string>(doc, "format", where) != kFormatName)
    throw Error(where + "not a flashmace model (format '" + doc["format"].get<std::string>() +
                "'); convert MACE models with tools/export_mace.py");
  const int version = required<int>(doc, "format_version", where);
  if (version != kFormatVersion)
    throw Error(where + "unknown format version " + std::to_string(version) + " (this build reads version " +
                std::to_string(kFormatVersion) + "); re-export the model or update flashmace");
  const std::string type = required<std::string>(doc, "model_type", where);
  if (type != "mace") throw Error(where + "unsupported model type '" + type + "' (supported: mace)");

  MaceConfig c;
  c.model_class = required<std::string>(doc, "model_class", where);
  if (c.model_class != "ScaleShiftMACE" && c.model_class != "MACE")
    throw Error(where + "unsupported model class '" + c.model_class + "' (supported: ScaleShiftMACE, MACE)");
  c.dtype = required<std::string>(doc, "dtype", where);
  if (c.dtype != "float64" && c.dtype != "float32")
    throw Error(where + "unsupported dtype '" + c.dtype + "' (float64 or float32)");
  c.r_max = required<double>(doc, "r_max", where);
  c.num_bessel = required<int>(doc, "num_bessel", where);
  c.num_polynomial_cutoff = required<int>(doc, "num_polynomial_cutoff", where);
  c.radial_type = required<std::string>(doc, "radial_type", where);
  if (c.radial_type != "bessel")
    throw Error(where + "unsupported radial_type '" + c.radial_type + "' (supported: bessel)");
  c.distance_transform = optional_string(doc, "distance_transform", "", where);
  if (c.distance_transform == "None") c.distance_transform.clear();
  if (!c.distance_transform.empty() && c.distance_transform != "Agnesi" && c.distance_transform != "Soft")
    throw Error(where + "unsupported distance_transform '" + c.distance_transform + "' (Agnesi, Soft or null)");
  c.pair_repulsion = required<bool>(doc, "pair_repulsion", where);
  c.apply_cutoff = required<bool>(doc, "apply_cutoff", where);
  c.max_ell = required<int>(doc, "max_ell", where);
  c.hidden_irreps = required<std::string>(doc, "hidden_irreps", where);
  c.mlp_irreps = required<std::string>(doc, "MLP_irreps", where);
  c.edge_irreps = optional_string(doc, "edge_irreps", "", where);
  c.use_edge_irreps_first = optional_bool(doc, "use_edge_irreps_first", false, where);
  c.use_agnostic_product = optional_bool(doc, "use_agnostic_product", false, where);
  c.gate = required<std::string>(doc, "gate", where);
  if (c.gate != "silu") throw Error(where + "unsupported gate '" + c.gate + "' (supported: silu)");
  c.num_interactions = required<int>(doc, "num_interactions", where);
  c.correlation = required<std::vector<int>>(doc, "correlation", where);
  c.interaction_cls_first = required<std::string>(doc, "interaction_cls_first", where);
  c.interaction_cls = required<std::string>(doc, "interaction_cls", where);
  c.readout_cls = required<std::string>(doc, "readout_cls", where);
  c.radial_mlp = required<std::vector<int>>(doc, "radial_MLP", where);
  c.atomic_numbers = required<std::vector<int>>(doc, "atomic_numbers", where);
  c.atomic_energies = required<std::vector<double>>(doc, "atomic_energies", where);
  c.avg_num_neighbors = required<std::vector<double>>(doc, "avg_num_neighbors", where);
  c.heads = required<std::vector<std::string>>(doc, "heads", where);
  c.scale = per_head(doc, "scale", c.heads.size(), where);
  c.shift = per_head(doc, "shift", c.heads.size(), where);
  if (doc.contains("provenance")) c.provenance_json = doc["provenance"].dump();
  c.system_embeddings = parse_system_embeddings(doc, where);
  c.embedding_readout = optional_bool(doc, "embedding_readout", false, where);
  if (c.embedding_readout && c.system_embeddings.empty())
    throw Error(where + "embedding_readout without system embeddings");

  // Consistency checks that keep the math well defined.
  for (const auto* cls : {&c.interaction_cls_first, &c.interaction_cls})
    if (std::find(kInteractionClasses.begin(), kInteractionClasses.end(), *cls) == kInteractionClasses.end())
      throw Error(where + "unsupported interaction block class '" + *cls + "'");
  if (c.readout_cls != "NonLinearReadoutBlock")
    throw Error(where + "unsupported readout class '" + c.readout_cls + "' (supported: NonLinearReadoutBlock)");
  if (c.heads.empty()) throw Error(where + "metadata 'heads' names no head");
  for (std::size_t h = 0; h < c.heads.size(); ++h)
    if (c.heads[h].empty() || std::find(c.heads.begin(), c.heads.begin() + h, c.heads[h]) != c.heads.begin() + h)
      throw Error(where + "metadata 'heads' must hold distinct non-empty names");
  if (c.num_interactions < 1) throw Error(where + "num_interactions must be at least 1");
  if (static_cast<int>(c.correlation.size()) != c.num_interactions ||
      static_cast<int>(c.avg_num_neighbors.size()) != c.num_interactions)
    throw Error(where + "correlation and avg_num_neighbors need one entry per interaction");
  for (int nu : c.correlation)
    if (nu < 1) throw Error(where + "correlation must be at least 1");
  if (c.atomic_numbers.empty() || c.atomic_numbers.size() * c.heads.size() != c.atomic_energies.size())
    throw Error(where + "atomic_energies must hold one value per element and head (" +
                std::to_string(c.atomic_numbers.size()) + " x " + std::to_string(c.heads.size()) + "), got " +
                std::to_string(c.atomic_energies.size()));
  if (!std::is_sorted(c.atomic_numbers.begin(), c.atomic_numbers.end()))
    throw Error(where + "atomic_numbers must be in ascending order");
  if (c.r_max <= 0 || c.num_bessel < 1 || c.num_polynomial_cutoff < 1 || c.max_ell < 0)
    throw Error(where + "r_max, num_bessel, num_polynomial_cutoff must be positive");
  const Irreps hidden = c.hidden();  // throws on a bad string
  if (c.channels() == 0) throw Error(where + "hidden irreps '" + c.hidden_irreps + "' have no 0e block");
  for (const auto& b : hidden.blocks()) {
    if (b.mul != c.channels() || b.ir.p != (b.ir.l % 2 == 0 ? 1 : -1))
      throw Error(where + "hidden irreps '" + c.hidden_irreps +
                  "' unsupported: need natural parity (0e, 1o, 2e, ...) and equal multiplicities");
  }
  Irreps::parse(c.mlp_irreps);
  if (!c.edge_irreps.empty()) {
    const Irreps e = Irreps::parse(c.edge_irreps);
    if (c.use_edge_irreps_first && c.layer_edge_irreps(0).dim() == 0)
      throw Error(where + "edge irreps '" + c.edge_irreps + "' have no 0e block for the first layer");
    if (e.dim() == 0) throw Error(where + "edge irreps '" + c.edge_irreps + "' are empty");
  }
  return c;
}

std::string mace_config_to_json(const MaceConfig& c) {
  json doc = {{"format", kFormatName},
              {"format_version", kFormatVersion},
              {"model_type", "mace"},
              {"model_class", c.model_class},
              {"dtype", c.dtype},
              {"r_max", c.r_max},
              {"num_bessel", c.num_bessel},
              {"num_polynomial_cutoff", c.num_polynomial_cutoff},
              {"radial_type", c.radial_type},
              {"distance_transform", c.distance_transform.empty() ? json(nullptr) : json(c.distance_transform)},
              {"pair_repulsion", c.pair_repulsion},
              {"apply_cutoff", c.apply_cutoff},
              {"max_ell", c.max_ell},
              {"hidden_irreps", c.hidden_irreps},
              {"MLP_irreps", c.mlp_irreps},
              {"edge_irreps", c.edge_irreps.empty() ? json(nullptr) : json(c.edge_irreps)},
              {"use_edge_irreps_first", c.use_edge_irreps_first},
              {"use_agnostic_product", c.use_agnostic_product},
              {"gate", c.gate},
              {"num_interactions", c.num_interactions},
              {"correlation", c.correlation},
              {"interaction_cls_first", c.interaction_cls_first},
              {"interaction_cls", c.interaction_cls},
              {"readout_cls", c.readout_cls},
              {"radial_MLP", c.radial_mlp},
              {"atomic_numbers", c.atomic_numbers},
              {"atomic_energies", c.atomic_energies},
              {"avg_num_neighbors", c.avg_num_neighbors},
              {"scale", c.scale.size() == 1 ? json(c.scale.front()) : json(c.scale)},
              {"shift", c.shift.size() == 1 ? json(c.shift.front()) : json(c.shift)},
              {"heads", c.heads},
              {"provenance", json::parse(c.provenance_json)}};
  if (!c.system_embeddings.empty()) {
    json list = json::array();
    for (const auto& s : c.system_embeddings) {
      json e = {{"name", s.name}, {"type", s.type}, {"emb_dim", s.emb_dim}};
      if (s.type == "categorical") {
        e["num_classes"] = s.num_classes;
        e["offset"] = s.offset;
      } else {
        e["use_bias"] = s.use_bias;
      }
      list.push_back(e);
    }
    doc["system_embeddings"] = list;
    doc["embedding_readout"] = c.embedding_readout;
  }
  return doc.dump();
}

std::string MaceConfig::default_head() const {
  if (heads.size() == 1) return heads.front();
  for (const std::string& h : heads) {
    std::string lower = h;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (lower == "default") return h;
  }
  return "";
}

int MaceConfig::head_index(const std::string& name) const {
  const auto it = std::find(heads.begin(), heads.end(), name);
  return it == heads.end() ? -1 : static_cast<int>(it - heads.begin());
}

const char* element_symbol(int z) { return (z >= 1 && z <= 118) ? kSymbols[z] : ""; }

int atomic_number_from_symbol(const std::string& symbol) {
  for (int z = 1; z <= 118; ++z)
    if (symbol == kSymbols[z]) return z;
  return 0;
}

}  // namespace flashmace
