#include "engine_flags.h"

#include <algorithm>

namespace flashmace {

const char* const kEngineFlagsUsage =
    "engine options (as pair_style mace/flash keywords, docs/pair_style.md):\n"
    "  --path fast|reference            the evaluation path (default fast)\n"
    "  --dtype float32|float64  --device cpu|cuda|cuda:N\n"
    "  --head NAME                      a multi-head model's head (default: its default head)\n"
    "  --charge Q  --spin S  --elec-temp T  per-structure inputs of models that embed them (MACE-OMOL;\n"
    "                                   default: mace-torch's, charge 0, spin 1, elec_temp 0)\n"
    "  --edge-chunk N  --atom-chunk N   fast path: force chunk sizes (default: the memory planner's)\n"
    "  --memory GB                      fast path: working-memory budget (default: 1/2 of the free memory on CPU, 3/4 on a GPU)\n"
    "  --sc auto|specialized|generic    fast path: symmetric-contraction executor (default auto)\n"
    "  --tf32 auto|yes|no               fast path, float32 on CUDA: tensor cores in the radial MLP (auto, default:\n"
    "                                   its output layer in split TF32, float32's accuracy; yes: every GEMM in\n"
    "                                   plain TF32, ~1e-3 force error; no: FP32 cores); a bare --tf32 = yes\n"
    "  --reassociate auto|on|off        fast path: the first interaction per sender element (auto: up to 8\n"
    "                                   elements present, default); --no-reassociate = --reassociate off\n"
    "  --radial exact|spline            fast path: radial MLPs exact (default) or read from tables made at load,\n"
    "                                   with their measured error printed (opt-in, docs/pair_style.md)\n"
    "  --radial-intervals N             radial spline: the tables' intervals (default: the dtype's tolerance)\n"
    "  --radial-pairs auto|on|off       fast path: one radial MLP per pair of reverse edges (default auto)\n"
    "  --atom-order auto|input          fast path: steps that recompute in several node blocks order the atoms\n"
    "                                   along a space-filling curve inside the engine (auto, default) or keep\n"
    "                                   the input's order\n"
    "  --cuda-graph on|off              fast path on CUDA: replay steps that fit one chunk as CUDA graphs (on)\n"
    "  --side-stream on|off             fast path on CUDA: later layers' radial MLPs on a second stream (on)\n";

bool set_cli_engine_option(EngineOptions& options, int argc, char** argv, int* i) {
  const std::string flag = argv[*i];
  if (flag == "--tf32") {
    const std::string next = *i + 1 < argc ? argv[*i + 1] : "";
    if (next != "auto" && next != "yes" && next != "no") return set_engine_option(options, "tf32", "yes");
  }
  if (flag == "--no-reassociate") return set_engine_option(options, "reassociate", "off");
  if (flag.rfind("--", 0) != 0) return false;
  std::string key = flag.substr(2);
  std::replace(key.begin(), key.end(), '-', '_');
  const auto& keys = engine_option_keys();
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) return false;
  if (*i + 1 >= argc) throw Error(flag + " needs a value");
  const std::string value = argv[++*i];
  try {
    return set_engine_option(options, key, value);
  } catch (const OptionError& e) {
    // "edge_chunk -5: ..." spelled as the flag was: "--edge-chunk -5: ..."
    throw Error(std::string(e.what()).replace(0, key.size(), flag));
  }
}

}  // namespace flashmace
