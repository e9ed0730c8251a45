#include "engine/engine_options.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "model/device.h"

namespace flashmace {

namespace {

// One option: what it accepts (for the message) and how it is set; set returns false for a value
// it does not accept.
struct OptionSpec {
  const char* accepts;
  std::function<bool(EngineOptions&, const std::string&)> set;
};

// Index of value in words, or -1.
template <std::size_t N>
int word_index(const std::string& value, const char* const (&words)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (value == words[i]) return static_cast<int>(i);
  return -1;
}

template <std::size_t N, typename T>
bool set_word(const std::string& value, const char* const (&words)[N], const T (&values)[N], T* out) {
  const int i = word_index(value, words);
  if (i >= 0) *out = values[i];
  return i >= 0;
}

bool set_on_off(const std::string& value, bool* out) {
  static const char* const words[] = {"on", "off"};
  static const bool values[] = {true, false};
  return set_word(value, words, values, out);
}

bool set_count(const std::string& value, int64_t* out) {
  std::size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    return false;
  }
  if (used != value.size() || n < 0) return false;
  *out = n;
  return true;
}

bool set_system(const std::string& value, const char* name, EngineOptions* o) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(value, &used);
  } catch (const std::exception&) {
    return false;
  }
  if (used != value.size() || !std::isfinite(x)) return false;
  o->system[name] = x;
  return true;
}

bool is_cuda_name(const std::string& value) {
  if (value == "cuda") return true;
  if (value.rfind("cuda:", 0) != 0 || value.size() == 5) return false;
  for (std::size_t i = 5; i < value.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(value[i]))) return false;
  return true;
}

const std::map<std::string, OptionSpec>& specs() {
  using O = EngineOptions;
  using V = const std::string&;
  static const std::map<std::string, OptionSpec> table = {
      {"device", {"use cpu, cuda or cuda:N", [](O& o, V v) {
         if (v != "cpu" && !is_cuda_name(v)) return false;
         o.device = v;
         return true;
       }}},
      {"dtype", {"use float32 or float64", [](O& o, V v) {
         static const char* const words[] = {"float64", "float32"};
         static const Dtype values[] = {Dtype::Float64, Dtype::Float32};
         return set_word(v, words, values, &o.dtype);
       }}},
      {"charge", {"the structure's total charge (a number)", [](O& o, V v) { return set_system(v, "total_charge", &o); }}},
      {"spin", {"the structure's total spin (a number)", [](O& o, V v) { return set_system(v, "total_spin", &o); }}},
      {"elec_temp", {"the electronic temperature (a number)", [](O& o, V v) { return set_system(v, "elec_temp", &o); }}},
      {"head", {"a head of the model (letters, digits, _ . + -)", [](O& o, V v) {
         if (v.empty()) return false;
         for (const char ch : v)
           if (!std::isalnum(static_cast<unsigned char>(ch)) && std::string("_.+-").find(ch) == std::string::npos)
             return false;
         o.head = v;
         return true;
       }}},
      {"path", {"use fast or reference", [](O& o, V v) {
         static const char* const words[] = {"fast", "reference"};
         static const EvaluationPath values[] = {EvaluationPath::Fast, EvaluationPath::Reference};
         return set_word(v, words, values, &o.path);
       }}},
      {"edge_chunk", {"use 0 (automatic) or more", [](O& o, V v) { return set_count(v, &o.edge_chunk); }}},
      {"atom_chunk", {"use 0 (automatic) or more", [](O& o, V v) { return set_count(v, &o.atom_chunk); }}},
      {"memory", {"a budget in GB, 0 = default", [](O& o, V v) {
         std::size_t used = 0;
         double gb = -1;
         try {
           gb = std::stod(v, &used);
         } catch (const std::exception&) {
           return false;
         }
         if (used != v.size() || !(gb >= 0) || !std::isfinite(gb)) return false;
         o.memory_bytes = gb * 1e9;
         return true;
       }}},
      {"sc", {"use auto, specialized or generic", [](O& o, V v) {
         static const char* const words[] = {"auto", "specialized", "generic"};
         static const ScExecutorKind values[] = {ScExecutorKind::Auto, ScExecutorKind::Specialized,
                                                 ScExecutorKind::Generic};
         return set_word(v, words, values, &o.sc);
       }}},
      {"tf32", {"use auto, yes or no", [](O& o, V v) {
         static const char* const words[] = {"auto", "yes", "no"};
         static const Choice values[] = {Choice::Auto, Choice::On, Choice::Off};
         return set_word(v, words, values, &o.tf32);
       }}},
      {"reassociate", {"use auto, on or off", [](O& o, V v) {
         static const char* const words[] = {"auto", "on", "off"};
         static const Choice values[] = {Choice::Auto, Choice::On, Choice::Off};
         return set_word(v, words, values, &o.reassociate);
       }}},
      {"radial", {"use exact or spline", [](O& o, V v) {
         static const char* const words[] = {"exact", "spline"};
         static const RadialMode values[] = {RadialMode::Exact, RadialMode::Spline};
         return set_word(v, words, values, &o.radial);
       }}},
      {"radial_intervals", {"use 0 (automatic) or 16 to 4096", [](O& o, V v) {
         int64_t n = -1;
         if (!set_count(v, &n) || (n != 0 && (n < 16 || n > 4096))) return false;
         o.radial_intervals = n;
         return true;
       }}},
      {"radial_pairs", {"use auto, on or off", [](O& o, V v) {
         static const char* const words[] = {"auto", "on", "off"};
         static const Choice values[] = {Choice::Auto, Choice::On, Choice::Off};
         return set_word(v, words, values, &o.radial_pairs);
       }}},
      {"atom_order", {"use auto or input", [](O& o, V v) {
         static const char* const words[] = {"auto", "input"};
         static const Choice values[] = {Choice::Auto, Choice::Off};
         return set_word(v, words, values, &o.atom_order);
       }}},
      {"cuda_graph", {"use on or off", [](O& o, V v) { return set_on_off(v, &o.cuda_graph); }}},
      {"side_stream", {"use on or off", [](O& o, V v) { return set_on_off(v, &o.side_stream); }}},
  };
  return table;
}

}  // namespace

bool set_engine_option(EngineOptions& options, const std::string& key, const std::string& value) {
  const auto it = specs().find(key);
  if (it == specs().end()) return false;
  if (!it->second.set(options, value)) throw OptionError(key + " " + value + ": " + it->second.accepts);
  return true;
}

const std::vector<std::string>& engine_option_keys() {
  // The order users read them in (the pair_style documentation's).
  static const std::vector<std::string> keys = {"device",      "dtype",        "head",       "charge",
                                                "spin",        "elec_temp",    "path",
                                                "edge_chunk",  "atom_chunk",   "memory",     "sc",
                                                "tf32",        "reassociate",  "radial",     "radial_intervals",
                                                "radial_pairs", "atom_order",  "cuda_graph", "side_stream"};
  return keys;
}

std::string resolved_dtype(const EngineOptions& o, const std::string& model_dtype) {
  switch (o.dtype) {
    case Dtype::Float64: return "float64";
    case Dtype::Float32: return "float32";
    case Dtype::FromModel: break;
  }
  if (model_dtype != "float64" && model_dtype != "float32")
    throw Error("Unknown dtype '" + model_dtype + "' in the model file (use float64 or float32)");
  return model_dtype;
}

void validate(const EngineOptions& o, const std::string& model_dtype) {
  if (o.device != "cpu" && !is_cuda_name(o.device))
    throw OptionError("device " + o.device + ": use cpu, cuda or cuda:N");
  if (o.edge_chunk < 0 || o.atom_chunk < 0) throw OptionError("Chunk sizes must be positive (0 = chosen by the planner)");
  if (o.memory_bytes < 0) throw OptionError("The memory budget must be positive (0 = default)");
  if (o.device_sharers < 1) throw OptionError("device_sharers must be at least 1");
  const std::string dtype = resolved_dtype(o, model_dtype);
  if (o.path == EvaluationPath::Fast && o.tf32 == Choice::On && (dtype != "float32" || o.device == "cpu"))
    throw OptionError(
        "tf32 yes needs dtype float32 on a CUDA device (it lets the radial-MLP GEMMs use TF32 tensor cores); "
        "this evaluator is " + dtype + " on " + o.device);
  if (o.path == EvaluationPath::Reference && o.radial == RadialMode::Spline)
    throw OptionError("radial spline is a fast-path mode (the reference path runs the exact radial MLP); "
                      "use path fast or radial exact");
}

double default_memory_budget(const std::string& device, int sharers) {
  const double free = static_cast<double>(free_device_memory(device));
  // On the CPU half of the available memory (the rest for LAMMPS, the OS and other jobs); 1 GiB when
  // the system does not say. A budget that forces recomputation costs ~1.2x per step.
  const double whole = device == "cpu" ? (free > 0 ? 0.5 * free : 1024.0 * 1024.0 * 1024.0) : 0.75 * free;
  return whole / std::max(1, sharers);
}

}  // namespace flashmace
