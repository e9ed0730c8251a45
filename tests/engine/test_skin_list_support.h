#pragma once
// The skin-list cases (test_skin_list.cpp on the CPU, gpu/test_gpu_skin_list.cpp on CUDA): a list
// built once with a skin, atoms moved for several steps, every step's outputs against the
// reference path on the same positions (which applies the cutoff itself on the host side), and the
// engine's rebuild counters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>

#include "core/host_transfers.h"
#include "core/model_file.h"
#include "engine/host_evaluation.h"
#include "test_support.h"

namespace flashmace::testing {

struct SkinCase {
  std::string model, device, structure;  // structure: bulk (the reference file's) or small_triclinic
  std::string radial_pairs = "auto";
  int64_t edge_chunk = 0;           // 0: the planner's
  int64_t atom_chunk = 0;           // 0: the planner's
  bool expect_compaction = true;    // false: a receiver row beyond a chunk, which takes the vectors path
  bool expect_blocks = false;       // several blocks of rows (a chunked plan): logged, never captured
  double skin = 1.0;                // A
  int steps = 6;
};

constexpr double kSkinEnergyRelTol = 1e-12;
constexpr double kSkinAbsTol = 1e-10;
constexpr double kMinDistance = 0.1;

inline std::unique_ptr<Evaluator> skin_evaluator(const SkinCase& c, const std::string& path,
                                                 std::vector<std::string>* log = nullptr) {
  EngineOptions o;
  if (log) o.log = [log](const std::string& line) { log->push_back(line); };
  set_engine_option(o, "path", path);
  set_engine_option(o, "device", c.device);
  set_engine_option(o, "radial_pairs", c.radial_pairs);
  o.dtype = Dtype::Float64;
  o.edge_chunk = c.edge_chunk;
  o.atom_chunk = c.atom_chunk;
  return make_evaluator(ModelFile::load(exported_model(c.model)), o);
}

// The reference file's periodic bulk, or its first two atoms in a triclinic cell shorter than
// twice the cutoff (many images of each atom, and of itself).
inline Structure skin_structure(const SkinCase& c) {
  Structure s = reference_structure(SafetensorsFile::load(reference_file(c.model)), "bulk");
  if (c.structure == "small_triclinic") {
    s.atomic_numbers.resize(2);
    s.positions = {0.1, 0.2, 0.3, 1.6, 1.3, 1.7};
    s.cell = {3.1, 0, 0, 0.9, 2.9, 0, -0.7, 0.6, 3.3};
  }
  s.pbc = {true, true, true};
  return s;
}

// n x n x n copies of a periodic cell.
inline Structure supercell(const Structure& s, int n) {
  Structure t = s;
  t.atomic_numbers.clear();
  t.positions.clear();
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      for (int c = 0; c < n; ++c)
        for (int i = 0; i < s.size(); ++i) {
          t.atomic_numbers.push_back(s.atomic_numbers[i]);
          for (int d = 0; d < 3; ++d)
            t.positions.push_back(s.positions[3 * i + d] + a * s.cell[d] + b * s.cell[3 + d] + c * s.cell[6 + d]);
        }
  for (double& x : t.cell) x *= n;
  return t;
}

// The list of all pairs within r_max + skin, every sender folded into its owned atom.
inline HostList skin_list(const Evaluator& ev, const Structure& s, double skin) {
  return host_list(ev, s, ev.cutoff() + skin);
}

// Positions after `step` steps of a fixed random velocity: at most 0.05 A per component per step.
inline std::vector<double> moved(const std::vector<double>& x0, int step, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-0.05, 0.05);
  std::vector<double> x = x0;
  for (double& c : x) c += step * u(rng);
  return x;
}

inline void expect_equal(const LocalPrediction& got, const LocalPrediction& want, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kSkinEnergyRelTol);
  EXPECT_LE(max_abs_diff(got.node_energy, want.node_energy), kSkinAbsTol);
  EXPECT_LE(max_abs_diff(got.forces, want.forces), kSkinAbsTol);
  EXPECT_LE(max_abs_diff({got.virial.begin(), got.virial.end()}, {want.virial.begin(), want.virial.end()}), kSkinAbsTol);
  EXPECT_LE(max_abs_diff(got.atom_virial, want.atom_virial), kSkinAbsTol);
}

// What a step between list builds copies between host and device: nothing on the CPU; on a GPU the
// positions up, the outputs (energy, virial, node energies, forces, per-atom virials) down in one
// copy, and the bucket status read of the compacted list (a float64 triple).
inline void expect_step_transfers(const HostTransfers& copies, const SkinCase& c, const HostList& list) {
  if (c.device == "cpu") {
    EXPECT_EQ(copies.to_device_bytes + copies.to_host_bytes + copies.copies, 0);
    return;
  }
  const int64_t d = sizeof(double);
  EXPECT_EQ(copies.to_device_bytes, 3 * list.ntotal * d);
  const int64_t status = c.expect_compaction ? 3 * d : 0;
  EXPECT_EQ(copies.to_host_bytes, (1 + 9 + list.nlocal + 3 * list.ntotal + 6 * list.ntotal) * d + status);
  EXPECT_EQ(copies.copies, c.expect_compaction ? 3 : 2);
}

// Steps on one list: each equals the reference path (and its energy and forces the reference
// path's own neighbour list on the moved structure); one topology and one pairing for the list, one
// capture on CUDA; a new list id builds anew.
inline void check_skin_steps(const SkinCase& c) {
  std::vector<std::string> log;
  const auto fast = skin_evaluator(c, "fast", &log);
  const auto ref = skin_evaluator(c, "reference");
  Structure s = skin_structure(c);
  const HostList list = skin_list(*fast, s, c.skin);
  ResidentList fast_list, ref_list;
  const std::vector<double> x0 = s.positions;
  for (int k = 0; k < c.steps; ++k) {
    s.positions = moved(x0, k);
    HostTransfers copies;
    LocalPrediction got;
    {
      const HostTransferScope counting(&copies);
      got = fast_list.evaluate(*fast, list, 1, s.positions.data(), s.cell, kMinDistance, nullptr, true);
    }
    if (k > 0) expect_step_transfers(copies, c, list);
    const LocalPrediction want =
        ref_list.evaluate(*ref, list, 0, s.positions.data(), s.cell, kMinDistance, nullptr, true);
    expect_equal(got, want, "step " + std::to_string(k));
    const Prediction own = evaluate_structure(*ref, s);
    EXPECT_LE(std::abs(got.energy - own.energy) / std::abs(own.energy), kSkinEnergyRelTol) << "step " << k;
    EXPECT_LE(max_abs_diff(got.forces, own.forces), kSkinAbsTol) << "step " << k;
  }
  const EvaluationCounters n = fast->counters();
  EXPECT_EQ(n.evaluations, c.steps);
  EXPECT_EQ(n.bucket_overflows, 0);
  if (c.expect_compaction) {
    const bool graphs = c.device != "cpu" && !c.expect_blocks;
    EXPECT_EQ(n.topology_builds, 1);
    EXPECT_EQ(n.radial_pair_builds, c.radial_pairs == "off" ? 0 : 1);
    EXPECT_EQ(n.graph_captures, graphs ? 1 : 0);
    EXPECT_EQ(n.graph_replays, graphs ? c.steps - 1 : 0);
  }
  int blocks = 0;
  for (const std::string& line : log)
    if (line.rfind("neighbour list: ", 0) == 0) blocks = std::stoi(line.substr(16));
  if (c.expect_blocks)
    EXPECT_GE(blocks, 3) << "a chunked plan's list in blocks of rows";
  else
    EXPECT_EQ(blocks, 0);
  // On the CPU the planner's own whole-list plan counts the radial rows once per reverse-edge pair
  // (a folded list has no ghosts), and the list's pairs bear that out: no note that they do not.
  if (c.device == "cpu" && c.edge_chunk == 0 && c.atom_chunk == 0) {
    bool paired = false;
    for (const std::string& line : log) {
      if (line.rfind("flashmace fast engine:", 0) == 0)
        paired = paired || line.find("radial rows once per reverse-edge pair") != std::string::npos;
      EXPECT_NE(line.rfind("memory plan:", 0), 0u) << line;
    }
    EXPECT_EQ(paired, c.radial_pairs != "off");
  }
  // A new list (here the same pairs under a new id) is adopted once.
  const LocalPrediction again = fast_list.evaluate(*fast, list, 2, s.positions.data(), s.cell, kMinDistance, nullptr, true);
  const LocalPrediction want = ref_list.evaluate(*ref, list, 0, s.positions.data(), s.cell, kMinDistance, nullptr, true);
  expect_equal(again, want, "new list");
  if (c.expect_compaction) {
    EXPECT_EQ(fast->counters().topology_builds, 2);
  }
}

inline bool logged_blocks(const std::vector<std::string>& log) {
  return std::any_of(log.begin(), log.end(), [](const std::string& l) { return l.rfind("neighbour list: ", 0) == 0; });
}

// Compressing by 2 and 4 % (`strain`) puts 6 and 12 % more pairs within the cutoff, beyond the
// bucket's headroom (a few percent on 8 copies of the bulk cell): the engine notices on the device,
// compacts anew, and the results stay exact.
inline void check_overflow(const SkinCase& c, double strain = 0.02) {
  std::vector<std::string> log;
  const auto fast = skin_evaluator(c, "fast", &log);
  const auto ref = skin_evaluator(c, "reference");
  Structure s = supercell(skin_structure(c), 2);
  const HostList list = skin_list(*fast, s, c.skin);
  ResidentList fast_list, ref_list;
  for (int k = 0; k < 3; ++k) {
    Structure t = s;
    const double f = 1.0 - strain * k;
    for (double& x : t.positions) x *= f;
    for (double& a : t.cell) a *= f;
    const LocalPrediction got = fast_list.evaluate(*fast, list, 1, t.positions.data(), t.cell, kMinDistance, nullptr, true);
    const LocalPrediction want = ref_list.evaluate(*ref, list, 0, t.positions.data(), t.cell, kMinDistance, nullptr, true);
    expect_equal(got, want, "compression step " + std::to_string(k));
  }
  EXPECT_GE(fast->counters().bucket_overflows, 1);
  EXPECT_EQ(logged_blocks(log), c.expect_blocks);
}

// A domain with explicit ghost rows (no folding: image 0), exchanged through the halo exchanger.
inline void check_ghost_rows(const SkinCase& c) {
  std::vector<std::string> log;
  const auto fast = skin_evaluator(c, "fast", &log);
  const auto ref = skin_evaluator(c, "reference");
  const Structure s = skin_structure(c);
  std::vector<int> owner;
  const LocalGraph g = periodic_local_graph(s, fast->cutoff() + c.skin, &owner);
  HostList list;
  list.nlocal = g.nlocal;
  list.ntotal = g.ntotal();
  for (int z : g.atomic_numbers) list.species.push_back(fast->config().element_index(z));
  list.sender = g.sender;
  list.receiver = g.receiver;
  list.image.assign(3 * g.sender.size(), 0);
  OwnerMapExchanger fast_halo(g.nlocal, owner), ref_halo(g.nlocal, owner);
  ResidentList fast_list, ref_list;
  for (int k = 0; k < 4; ++k) {
    std::vector<double> local(g.positions.begin(), g.positions.begin() + 3 * g.nlocal);
    local = moved(local, k);
    std::vector<double> x = g.positions;
    for (int i = 0; i < g.ntotal(); ++i) {
      const int o = i < g.nlocal ? i : owner[i - g.nlocal];
      for (int d = 0; d < 3; ++d) x[3 * i + d] = local[3 * o + d] + (g.positions[3 * i + d] - g.positions[3 * o + d]);
    }
    const LocalPrediction got = fast_list.evaluate(*fast, list, 1, x.data(), s.cell, kMinDistance, &fast_halo, true);
    const LocalPrediction want = ref_list.evaluate(*ref, list, 0, x.data(), s.cell, kMinDistance, &ref_halo, true);
    expect_equal(got, want, "ghost step " + std::to_string(k));
  }
  EXPECT_EQ(fast->counters().topology_builds, 1);
  EXPECT_EQ(logged_blocks(log), c.expect_blocks);
}

// An atom moved 0.05 A from its neighbour stops both paths, naming the two nodes.
inline void check_too_close(const SkinCase& c) {
  Structure s = skin_structure(c);
  const auto fast = skin_evaluator(c, "fast");
  const auto ref = skin_evaluator(c, "reference");
  const HostList list = skin_list(*fast, s, c.skin);
  // The first edge into atom 0 from another atom: its sender goes 0.05 A from atom 0's image.
  std::size_t e = 0;
  while (list.receiver[e] != 0 || list.sender[e] == 0) ++e;
  const int64_t j = list.sender[e];
  for (int d = 0; d < 3; ++d) {
    double shift = 0;
    for (int a = 0; a < 3; ++a) shift += list.image[3 * e + a] * s.cell[3 * a + d];
    s.positions[3 * j + d] = s.positions[d] - shift - (d == 0 ? 0.05 : 0.0);
  }
  for (Evaluator* ev : {fast.get(), ref.get()}) {
    ResidentList r;
    try {
      r.evaluate(*ev, list, ev == fast.get() ? 1 : 0, s.positions.data(), s.cell, kMinDistance, nullptr, false);
      ADD_FAILURE() << ev->path() << ": no TooCloseError";
    } catch (const TooCloseError& err) {
      EXPECT_EQ(std::min(err.sender, err.receiver), 0) << ev->path();
      EXPECT_EQ(std::max(err.sender, err.receiver), j) << ev->path();
      EXPECT_NEAR(err.distance, 0.05, 1e-9) << ev->path();
    }
  }
}

}  // namespace flashmace::testing
