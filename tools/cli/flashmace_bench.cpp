// flashmace-bench: time energy+forces steps of a model on a structure (perturbed cubic lattice,
// extended XYZ or LAMMPS data file) and report ms/step, atom-steps/s, peak memory and a per-stage
// breakdown, as a table and optionally JSON. --sweep grows the lattice until a step fails.
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/lattice.h"
#include "core/model_file.h"
#include "core/xyz.h"
#include "engine/cpu_buffer_cache.h"
#include "engine/host_evaluation.h"
#include "engine/measure.h"
#include "engine_flags.h"

namespace {

using flashmace::Error;

const char* kUsage =
    "usage: flashmace-bench --model FILE [structure] [options]\n"
    "structure (default: fcc, a 3.61, 6 cells = 864 atoms):\n"
    "  --lattice fcc|bcc  --a A  --cells N | --atoms N   --elements Cu,Ni  --perturb 0.05  --seed S\n"
    "      (fcc, bcc: random alloys of --elements; --lattice rocksalt --elements Mg,O --a 4.21, or\n"
    "       --lattice perovskite --elements Sr,Ti,O --a 3.905: ordered compounds, one element per sublattice)\n"
    "  --xyz FILE | --data FILE --types Cu,Ni            (extended XYZ / LAMMPS atomic data)\n"
    "options:\n"
    "  --warmup N (2)  --steps N (5)\n"
    "  --no-breakdown      skip the per-stage breakdown (it costs extra synchronised steps)\n"
    "  --profile-step      after the timed steps, one more between cudaProfilerStart and Stop (for a\n"
    "                      profiler started with collection off: ncu --profile-from-start off)\n"
    "  --skin S            also time MD steps on a neighbour list with an S A skin, as the pair styles\n"
    "                      run them: the list adopted once, then positions only (atoms moving), the\n"
    "                      cutoff applied on the device; results copied back to the host each step\n"
    "  --sweep             grow the lattice (cells N, N+1, ...) until a step fails; report the largest\n"
    "  --max-cells N       upper bound for --sweep (default 64)\n"
    "  --json FILE         also write the results as JSON\n";

struct Options {
  flashmace::EngineOptions engine;
  std::string model, lattice = "fcc", xyz, data, json;
  std::vector<std::string> elements, types;
  double a = 3.61, perturb = 0.05, skin = 0;
  int cells = 6, atoms = 0, warmup = 2, steps = 5, max_cells = 64;
  unsigned seed = 1;
  bool breakdown = true, sweep = false, profile_step = false;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

std::vector<int> atomic_numbers_of(const std::vector<std::string>& symbols) {
  std::vector<int> z;
  for (const auto& s : symbols) {
    const int n = flashmace::atomic_number_from_symbol(s);
    if (n == 0) throw Error("Unknown element '" + s + "'");
    z.push_back(n);
  }
  return z;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model")
      o.model = value();
    else if (flashmace::set_cli_engine_option(o.engine, argc, argv, &i))
      continue;
    else if (a == "--lattice")
      o.lattice = value();
    else if (a == "--a")
      o.a = std::stod(value());
    else if (a == "--cells")
      o.cells = std::stoi(value());
    else if (a == "--atoms")
      o.atoms = std::stoi(value());
    else if (a == "--elements")
      o.elements = split_list(value());
    else if (a == "--perturb")
      o.perturb = std::stod(value());
    else if (a == "--seed")
      o.seed = static_cast<unsigned>(std::stoul(value()));
    else if (a == "--xyz")
      o.xyz = value();
    else if (a == "--data")
      o.data = value();
    else if (a == "--types")
      o.types = split_list(value());
    else if (a == "--warmup")
      o.warmup = std::stoi(value());
    else if (a == "--steps")
      o.steps = std::stoi(value());
    else if (a == "--skin")
      o.skin = std::stod(value());
    else if (a == "--no-breakdown")
      o.breakdown = false;
    else if (a == "--profile-step")
      o.profile_step = true;
    else if (a == "--sweep")
      o.sweep = true;
    else if (a == "--max-cells")
      o.max_cells = std::stoi(value());
    else if (a == "--json")
      o.json = value();
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(flashmace::kEngineFlagsUsage, stdout);
      std::exit(0);
    } else
      throw Error("unknown argument '" + a + "'");
  }
  if (o.model.empty()) throw Error("--model is required");
  if (o.steps < 1 || o.warmup < 0) throw Error("--steps must be >= 1 and --warmup >= 0");
  if (o.skin < 0) throw Error("--skin must be >= 0");
  if (o.atoms > 0) {
    const int per_cell = flashmace::atoms_per_cell(o.lattice);
    o.cells = static_cast<int>(std::ceil(std::cbrt(static_cast<double>(o.atoms) / per_cell) - 1e-9));
  }
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Measurement {
  int atoms = 0, edges = 0;
  double ms_per_step = 0, neighbor_ms = 0, first_step_ms = 0, new_list_step_ms = 0, energy = 0;
  int64_t listed_pairs = 0;                   // --skin: the list's pairs
  double skin_ms_per_step = 0, skin_list_build_step_ms = 0, skin_rebuild_step_ms = 0;
  int64_t peak_bytes = 0;
  int64_t peak_reserved_bytes = 0;   // GPU: the allocator's reserved peak (CUDA-graph pools included)
  int64_t cpu_block_peak_bytes = 0;  // CPU: the most held at once in blocks of 1 MiB or more (the engine's)
  std::map<std::string, double> stage_ms;
  std::map<std::string, double> stage_peak_bytes;  // the device memory's peak within each stage
};

// The device memory's peak since the previous reading, for the breakdown's probe: on a GPU
// LibTorch's allocated bytes, on the CPU the blocks of 1 MiB or more (what the memory plan counts).
double peak_since_last_reading(const std::string& device) {
  double peak;
  if (device == "cpu") {
    peak = static_cast<double>(flashmace::cpu_buffer_cache_stats().peak_live_bytes);
    flashmace::reset_cpu_buffer_peak();
  } else {
    peak = static_cast<double>(flashmace::peak_memory_bytes(device));
    flashmace::reset_peak_memory(device);
  }
  return peak;
}

// MD steps between list builds, as the pair styles run them: the list with its skin adopted once
// (timed apart), then every step new positions (a fixed random velocity, at most 0.002 A per
// component per step) and the results back on the host.
void measure_skin(flashmace::Evaluator& model, const flashmace::Structure& s, const Options& o, Measurement* m) {
  const flashmace::HostList list = flashmace::host_list(model, s, model.cutoff() + o.skin);
  m->listed_pairs = static_cast<int64_t>(list.sender.size());
  std::array<double, 9> cell = s.cell;
  for (int a = 0; a < 3; ++a)
    if (!s.pbc[a])
      for (int d = 0; d < 3; ++d) cell[3 * a + d] = 0;
  std::mt19937 rng(o.seed);
  std::uniform_real_distribution<double> u(-0.002, 0.002);
  std::vector<double> velocity(s.positions.size()), x = s.positions;
  for (double& v : velocity) v = u(rng);
  flashmace::ResidentList resident;
  auto step = [&](int k, int64_t list_id) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = s.positions[i] + k * velocity[i];
    flashmace::StageTimer t([&] { flashmace::synchronize_device(o.engine.device); });
    t.start();
    resident.evaluate(model, list, list_id, x.data(), cell, 0.1, nullptr, false);
    t.lap("step");
    return 1e3 * t.seconds().at("step");
  };
  int64_t list_id = 1;
  m->skin_list_build_step_ms = step(0, list_id);
  int k = 1;
  for (int i = 0; i < o.warmup; ++i) step(k++, list_id);
  std::vector<double> times;
  for (int i = 0; i < o.steps; ++i) times.push_back(step(k++, list_id));
  m->skin_ms_per_step = median(times);
  // The same list again under new ids, as at LAMMPS's list builds between which the edge count
  // stays in the bucket: sorted and paired again, the captured step kept.
  std::vector<double> builds;
  for (int i = 0; i < 3; ++i) builds.push_back(step(k++, ++list_id));
  m->skin_rebuild_step_ms = median(builds);
}

Measurement measure(flashmace::Evaluator& model, const flashmace::Structure& s, const Options& o) {
  Measurement m;
  m.atoms = s.size();
  flashmace::StageTimer host_timer;
  host_timer.start();
  const flashmace::Graph graph = flashmace::build_neighbor_list(s, model.cutoff());
  host_timer.lap("neighbor_list");
  m.neighbor_ms = 1e3 * host_timer.seconds().at("neighbor_list");
  m.edges = graph.num_edges();
  // Graph and outputs stay on the device, as in an MD step of the Kokkos style; a step is timed
  // from its start to the device finishing it.
  std::optional<flashmace::ResidentGraph> resident;
  resident.emplace(model, s, graph);

  // The first step also plans, builds the edge topology and captures the CUDA graph (setup cost of
  // a new atom or edge count).
  for (int i = 0; i < o.warmup; ++i) {
    flashmace::StageTimer t([&] { flashmace::synchronize_device(o.engine.device); });
    t.start();
    resident->evaluate(model);
    t.lap("step");
    if (i == 0) m.first_step_ms = 1e3 * t.seconds().at("step");
  }
  flashmace::synchronize_device(o.engine.device);
  flashmace::reset_peak_memory(o.engine.device);
  flashmace::reset_cpu_buffer_peak();
  std::vector<double> times;
  for (int i = 0; i < o.steps; ++i) {
    flashmace::StageTimer t([&] { flashmace::synchronize_device(o.engine.device); });
    t.start();
    resident->evaluate(model);
    t.lap("step");
    times.push_back(t.seconds().at("step"));
  }
  m.ms_per_step = 1e3 * median(times);
  m.peak_bytes = flashmace::peak_memory_bytes(o.engine.device);
  m.peak_reserved_bytes = flashmace::peak_reserved_bytes(o.engine.device);
  if (o.engine.device == "cpu") m.cpu_block_peak_bytes = flashmace::cpu_buffer_cache_stats().peak_live_bytes;
  m.energy = resident->energy();
  if (o.profile_step) {
    // One step as the timed ones ran (a captured graph replayed), alone in the profiler's collection.
    flashmace::synchronize_device(o.engine.device);
    flashmace::cuda_profiler(o.engine.device, true);
    resident->evaluate(model);
    flashmace::synchronize_device(o.engine.device);
    flashmace::cuda_profiler(o.engine.device, false);
    std::fprintf(stderr, "flashmace-bench: one step profiled (cudaProfilerStart .. Stop)\n");
  }

  if (o.breakdown) {
    // On a GPU the timed steps above ran padded to a CUDA-graph bucket; steps under a stage timer
    // run unpadded, so the first of them plans and builds the edge topology and pairs anew (at 1M
    // atoms ~140 ms, which the "graph" stage would otherwise carry). One untimed step goes first.
    if (o.engine.device != "cpu") {
      flashmace::StageTimer warm_up([&] { flashmace::synchronize_device(o.engine.device); });
      model.set_stage_timer(&warm_up);
      resident->evaluate(model);
    }
    flashmace::StageTimer stages([&] { flashmace::synchronize_device(o.engine.device); });
    stages.set_probe([&] { return peak_since_last_reading(o.engine.device); });
    model.set_stage_timer(&stages);
    for (int i = 0; i < o.steps; ++i) resident->evaluate(model);
    model.set_stage_timer(nullptr);
    for (const auto& [stage, sec] : stages.seconds()) m.stage_ms[stage] = 1e3 * sec / o.steps;
    m.stage_peak_bytes = stages.maxima();
  }

  // A new neighbour list of the same atoms (its edges in reverse order: another topology of the
  // same size), as at an MD step that rebuilds the list; the first list's device copy goes first
  // (both at once may not fit at the largest sizes).
  resident.reset();
  {
    flashmace::ResidentGraph rebuilt(model, s, flashmace::reversed_edges(graph));
    flashmace::synchronize_device(o.engine.device);
    flashmace::StageTimer t([&] { flashmace::synchronize_device(o.engine.device); });
    t.start();
    rebuilt.evaluate(model);
    t.lap("step");
    m.new_list_step_ms = 1e3 * t.seconds().at("step");
  }
  return m;
}

flashmace::Structure structure_for(const Options& o, const flashmace::MaceConfig& config, int cells) {
  if (!o.xyz.empty()) return flashmace::read_extxyz(o.xyz);
  if (!o.data.empty()) return flashmace::read_lammps_data(o.data, atomic_numbers_of(o.types));
  std::vector<int> z = atomic_numbers_of(o.elements);
  if (z.empty()) z = {config.element_index(29) >= 0 ? 29 : config.atomic_numbers.front()};  // Cu if the model has it
  return flashmace::make_cubic_lattice(o.lattice, o.a, cells, z, o.perturb, o.seed);
}

void print(const Measurement& m, const flashmace::Evaluator& model, const std::string& hardware) {
  std::printf("%-10s %-8s %-7s %8s %10s %10s %12s %12s\n", "path", "dtype", "device", "atoms", "edges", "ms/step",
              "atom-steps/s", "peak MiB");
  std::printf("%-10s %-8s %-7s %8d %10d %10.2f %12.4g %12.1f\n", model.path().c_str(), model.dtype().c_str(),
              model.device().c_str(),
              m.atoms, m.edges, m.ms_per_step, m.atoms / (m.ms_per_step * 1e-3), m.peak_bytes / 1048576.0);
  std::printf("hardware: %s; neighbour list (host, not in ms/step): %.2f ms; first step (with setup): %.2f ms\n",
              hardware.c_str(), m.neighbor_ms, m.first_step_ms);
  if (m.peak_reserved_bytes > 0)
    std::printf("GPU memory: peak MiB is the peak of allocated bytes over the timed steps, without the memory a "
                "replayed CUDA graph holds in its own pool; the allocator's reserved peak (graph pools and cached "
                "blocks included): %.1f MiB\n", m.peak_reserved_bytes / 1048576.0);
  if (m.cpu_block_peak_bytes > 0)
    std::printf("CPU memory: peak MiB is the process's resident peak; the step's blocks of 1 MiB or more "
                "(what the memory plan predicts): %.1f MiB\n", m.cpu_block_peak_bytes / 1048576.0);
  std::printf("a step on a new neighbour list of the same atoms (edges reversed): %.2f ms\n", m.new_list_step_ms);
  if (m.listed_pairs > 0)
    std::printf("MD steps on a skin list (%lld listed pairs): %.2f ms/step (%.3fx the step above); "
                "the step adopting the first list (with CUDA-graph captures): %.2f ms, a later list of the same "
                "size: %.2f ms\n",
                static_cast<long long>(m.listed_pairs), m.skin_ms_per_step, m.skin_ms_per_step / m.ms_per_step,
                m.skin_list_build_step_ms, m.skin_rebuild_step_ms);
  if (!m.stage_ms.empty()) {
    double total = 0;
    for (const auto& kv : m.stage_ms) total += kv.second;
    std::printf("breakdown (synchronised steps, ms/step; the peak of the memory the step holds within each stage):\n");
    for (const auto& [stage, ms] : m.stage_ms)
      std::printf("  %-22s %10.3f  %5.1f%%  %10.1f MiB\n", stage.c_str(), ms, 100 * ms / total,
                  m.stage_peak_bytes.count(stage) ? m.stage_peak_bytes.at(stage) / 1048576.0 : 0.0);
  }
}

nlohmann::json to_json(const Measurement& m) {
  return {{"atoms", m.atoms},
          {"edges", m.edges},
          {"ms_per_step", m.ms_per_step},
          {"atom_steps_per_s", m.atoms / (m.ms_per_step * 1e-3)},
          {"peak_memory_bytes", m.peak_bytes},
          {"cpu_block_peak_bytes", m.cpu_block_peak_bytes},
          {"peak_reserved_bytes", m.peak_reserved_bytes},
          {"neighbor_list_ms", m.neighbor_ms},
          {"first_step_ms", m.first_step_ms},
          {"new_list_step_ms", m.new_list_step_ms},
          {"listed_pairs", m.listed_pairs},
          {"skin_ms_per_step", m.skin_ms_per_step},
          {"skin_list_build_step_ms", m.skin_list_build_step_ms},
          {"skin_rebuild_step_ms", m.skin_rebuild_step_ms},
          {"energy", m.energy},
          {"stage_ms", m.stage_ms},
          {"stage_peak_memory_bytes", m.stage_peak_bytes}};
}

// c10 errors carry a C++ backtrace after the message; the first part is what a user needs.
std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

bool is_out_of_memory(const std::exception& e) {
  const std::string what = message_of(e);
  return what.find("out of memory") != std::string::npos || what.find("bad_alloc") != std::string::npos ||
         what.find("CUDA error") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options o = parse(argc, argv);
    // Model load timed apart from the device's initialisation (a CUDA context: ~1 s, once per process).
    using clock = std::chrono::steady_clock;
    auto seconds_since = [](clock::time_point t0) {
      return std::chrono::duration<double>(clock::now() - t0).count();
    };
    const auto t_init = clock::now();
    flashmace::synchronize_device(flashmace::canonical_device(o.engine.device));
    const double init_s = seconds_since(t_init);
    const auto t_load = clock::now();
    const flashmace::ModelFile file = flashmace::ModelFile::load(o.model);
    const double file_s = seconds_since(t_load);
    flashmace::EngineOptions eo = o.engine;
    eo.log = [](const std::string& line) { std::printf("%s\n", line.c_str()); };
    const auto t_make = clock::now();
    std::unique_ptr<flashmace::Evaluator> evaluator = flashmace::make_evaluator(file, eo);
    const double make_s = seconds_since(t_make);
    std::printf("model load: %.3f s (file %.3f s, evaluator with its kernels %.3f s); device initialisation %.3f s\n",
                file_s + make_s, file_s, make_s, init_s);
    // measure(), then with --skin the skin-list steps on a fresh evaluator: the fixed list's captured
    // step and its memory go first (both at once may not fit at the largest sizes).
    auto measure_all = [&](const flashmace::Structure& s) {
      Measurement m = measure(*evaluator, s, o);
      if (o.skin > 0) {
        evaluator.reset();
        flashmace::release_cached_memory(o.engine.device);
        evaluator = flashmace::make_evaluator(file, o.engine);
        measure_skin(*evaluator, s, o, &m);
      }
      return m;
    };
    const std::string hardware = flashmace::device_name(o.engine.device);
    if (!evaluator->sc_executor().empty()) std::printf("symmetric contraction: %s\n", evaluator->sc_executor().c_str());
    if (!evaluator->tp_executor().empty()) std::printf("conv tensor product: %s\n", evaluator->tp_executor().c_str());
    nlohmann::json out = {{"model", o.model},     {"path", evaluator->path()}, {"dtype", evaluator->dtype()}, {"device", o.engine.device},
                          {"hardware", hardware}, {"warmup", o.warmup}, {"steps", o.steps},
                          {"sc_executor", evaluator->sc_executor()}, {"tp_executor", evaluator->tp_executor()},
                          {"model_load_s", file_s + make_s},      {"device_init_s", init_s}};
    if (!o.sweep) {
      const Measurement m = measure_all(structure_for(o, file.config(), o.cells));
      print(m, *evaluator, hardware);
      out["result"] = to_json(m);
    } else {
      if (!o.xyz.empty() || !o.data.empty()) throw Error("--sweep grows a lattice; it cannot use --xyz or --data");
      nlohmann::json runs = nlohmann::json::array();
      int largest = 0;
      for (int cells = o.cells; cells <= o.max_cells; ++cells) {
        try {
          const Measurement m = measure_all(structure_for(o, file.config(), cells));
          std::printf("sweep: %d cells, %d atoms: %.2f ms/step, peak %.1f MiB\n", cells, m.atoms, m.ms_per_step,
                      m.peak_bytes / 1048576.0);
          std::fflush(stdout);
          runs.push_back(to_json(m));
          largest = m.atoms;
        } catch (const std::exception& e) {
          if (!is_out_of_memory(e)) throw;
          std::printf("sweep: %d cells does not fit (%s)\n", cells, message_of(e).substr(0, 160).c_str());
          break;
        }
      }
      std::printf("largest system that fits: %d atoms\n", largest);
      out["sweep"] = runs;
      out["largest_atoms"] = largest;
    }
    if (!o.json.empty()) {
      std::ofstream(o.json) << out.dump(2) << "\n";
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "flashmace-bench: ERROR: %s\n%s", e.what(), kUsage);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flashmace-bench: ERROR: %s\n", message_of(e).c_str());
    return 1;
  }
  return 0;
}
