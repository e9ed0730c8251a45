// flashmace-eval: evaluate a flashmace model on one extended-XYZ structure (fast or reference
// path) and print energy, per-atom energies, forces and stress as one JSON object (the engine's
// messages on stderr).
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/model_file.h"
#include "core/xyz.h"
#include "engine/host_evaluation.h"
#include "engine_flags.h"

namespace {

const char* kUsage =
    "usage: flashmace-eval --model FILE --xyz FILE [engine options]\n"
    "Evaluates the model on the structure (default: the fast path) and prints JSON with energy (eV),\n"
    "node_energy [N], forces [N][3] (eV/A) and stress [3][3] (eV/A^3, MACE's sign convention).\n";

void usage(FILE* to) {
  std::fputs(kUsage, to);
  std::fputs(flashmace::kEngineFlagsUsage, to);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, xyz_path;
  flashmace::EngineOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "flashmace-eval: %s needs a value\n", name);
        usage(stderr);
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (flashmace::set_cli_engine_option(options, argc, argv, &i)) continue;
    } catch (const flashmace::Error& e) {
      std::fprintf(stderr, "flashmace-eval: ERROR: %s\n", e.what());
      return 1;
    }
    if (a == "--model")
      model_path = value("--model");
    else if (a == "--xyz")
      xyz_path = value("--xyz");
    else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "flashmace-eval: unknown argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (model_path.empty() || xyz_path.empty()) {
    std::fprintf(stderr, "flashmace-eval: --model and --xyz are required\n");
    usage(stderr);
    return 2;
  }
  // The engine's messages (its memory plan, radial spline tables) go to stderr, the JSON to stdout.
  options.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  try {
    const flashmace::ModelFile file = flashmace::ModelFile::load(model_path);
    const flashmace::Structure s = flashmace::read_extxyz(xyz_path);
    const std::unique_ptr<flashmace::Evaluator> model = flashmace::make_evaluator(file, options);
    const flashmace::Prediction p = flashmace::evaluate_structure(*model, s);
    nlohmann::json out;
    out["energy"] = p.energy;
    out["node_energy"] = p.node_energy;
    nlohmann::json forces = nlohmann::json::array();
    for (int i = 0; i < s.size(); ++i) forces.push_back({p.forces[3 * i], p.forces[3 * i + 1], p.forces[3 * i + 2]});
    out["forces"] = forces;
    nlohmann::json stress = nlohmann::json::array();
    for (int r = 0; r < 3; ++r) stress.push_back({p.stress[3 * r], p.stress[3 * r + 1], p.stress[3 * r + 2]});
    out["stress"] = stress;
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict) << std::endl;
  } catch (const flashmace::Error& e) {
    std::fprintf(stderr, "flashmace-eval: ERROR: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flashmace-eval: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
