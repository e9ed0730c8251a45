// The fast engine equals the reference path (the oracle) and official MACE, float64, for every
// output and for edge chunks of 1, 7, 64 and all edges (chunk boundaries inside one receiver's
// edges, at receiver boundaries, and none), atom chunks of 1, 5 and all, with and without recompute,
// with and without the radial MLP shared by reverse-edge pairs, on one periodic domain and on a
// ghost-atom domain whose features travel through the exchanger.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <tuple>

#include "core/lattice.h"
#include "core/local_graph.h"
#include "core/model_file.h"
#include "engine/cpu_buffer_cache.h"
#include "engine/host_evaluation.h"
#include "engine/ops/edge_geometry_op.h"
#include "engine/step/memory_plan.h"
#include "test_support.h"

namespace flashmace {
namespace {

// The acceptance tolerances: the two paths differ only in summation order (float64 round-off).
constexpr double kEnergyRelTol = 1e-12;
constexpr double kAbsTol = 1e-10;

std::unique_ptr<Evaluator> evaluator(const std::string& model, const std::string& path, int64_t edge_chunk = 0,
                                     int64_t atom_chunk = 0, const std::string& radial_pairs = "on",
                                     double memory_bytes = 0) {
  EngineOptions o;
  set_engine_option(o, "path", path);
  o.dtype = Dtype::Float64;
  o.edge_chunk = edge_chunk;
  o.atom_chunk = atom_chunk;
  o.memory_bytes = memory_bytes;
  set_engine_option(o, "radial_pairs", radial_pairs);
  return make_evaluator(ModelFile::load(testing::exported_model(model)), o);
}

std::vector<double> flat(const std::array<double, 9>& a) { return {a.begin(), a.end()}; }

struct Case {
  std::string model, structure;
  int64_t edge_chunk, atom_chunk;
  std::string radial_pairs = "on";
  // A one-byte budget: no layer's message sums are kept; each node block recomputes its own with
  // its edges in the backward pass (with forced chunks; the planner's own choice is tested below).
  bool streamed = false;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << "/" << c.structure << " edge chunk " << c.edge_chunk << " atom chunk " << c.atom_chunk
      << " radial pairs " << c.radial_pairs << (c.streamed ? " streamed sums" : "");
}

class FastEngineCase : public ::testing::TestWithParam<Case> {};

TEST_P(FastEngineCase, ChunkedEqualsReferenceAndOfficialMace) {
  const Case c = GetParam();
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(c.model));
  const Structure s = testing::reference_structure(ref, c.structure);
  const Graph g = testing::reference_graph(ref, c.structure);
  const Prediction want = evaluate_structure(*evaluator(c.model, "reference"), s, g);
  const Prediction got =
      evaluate_structure(*evaluator(c.model, "fast", c.edge_chunk, c.atom_chunk, c.radial_pairs, c.streamed ? 1 : 0), s, g);

  EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol);
  EXPECT_LE(testing::max_abs_diff(got.node_energy, want.node_energy), kAbsTol);
  EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol);
  EXPECT_LE(testing::max_abs_diff(flat(got.virial), flat(want.virial)), kAbsTol);
  // And against official MACE directly.
  const double e_mace = ref.to_doubles(c.structure + ".output.energy")[0];
  EXPECT_LE(std::abs(got.energy - e_mace) / std::abs(e_mace), kEnergyRelTol);
  EXPECT_LE(testing::max_abs_diff(got.forces, ref.to_doubles(c.structure + ".output.forces")), kAbsTol);
  if (s.periodic()) {
    EXPECT_LE(testing::max_abs_diff(flat(got.stress), ref.to_doubles(c.structure + ".output.stress")), kAbsTol);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string model : {"scalar_l0", "small_l1", "large_l2"})
    for (const std::string structure : {"bulk", "cluster"}) {
      out.push_back({model, structure, 0, 0});  // planner: everything fits, no recompute
      out.push_back({model, structure, 0, 0, "off"});
      out.push_back({model, structure, 7, 5});
      out.push_back({model, structure, 64, 0});
      out.push_back({model, structure, 64, 0, "off"});
      out.push_back({model, structure, 7, 5, "on", true});
      out.push_back({model, structure, 64, 0, "off", true});
    }
  out.push_back({"small_l1", "bulk", 1, 1});
  out.push_back({"large_l2", "cluster", 1, 3});
  // Chunks of one edge and blocks of one row with streamed sums: every row's sums come from
  // several chunks, run forward twice in the backward pass.
  out.push_back({"small_l1", "bulk", 1, 1, "on", true});
  out.push_back({"large_l2", "cluster", 1, 3, "off", true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(SharedReference, FastEngineCase, ::testing::ValuesIn(cases()), [](const auto& info) {
  return info.param.model + "_" + info.param.structure + "_e" + std::to_string(info.param.edge_chunk) + "_a" +
         std::to_string(info.param.atom_chunk) + "_pairs_" + info.param.radial_pairs +
         (info.param.streamed ? "_streamed" : "");
});

// A step in several node blocks keeps the owned atoms in a spatial order inside the engine (it says
// so once); with it and without it (atom_order input) every output, per atom ones included, equals
// the reference path in the caller's order, with the last layer's backward pass inside its forward
// pass and the message sums of the first layer kept or recomputed.
TEST(FastEngine, AtomOrderChangesNoOutput) {
  const Structure s = make_cubic_lattice("fcc", 3.61, 5, {28, 29}, 0.05, 9);  // 500 atoms, x slowest
  const ModelFile file = ModelFile::load(testing::exported_model("small_l1"));
  EngineOptions o;
  o.dtype = Dtype::Float64;
  o.path = EvaluationPath::Reference;
  const Prediction want = evaluate_structure(*make_evaluator(file, o), s);
  o.path = EvaluationPath::Fast;
  for (const std::string order : {"auto", "input"})
    for (const double memory : {0.0, 1.0}) {
      std::vector<std::string> said;
      set_engine_option(o, "atom_order", order);
      o.edge_chunk = 3000;  // (~40 atoms per block)
      o.memory_bytes = memory;  // (1 byte: the first layer's message sums recomputed per block)
      o.log = [&](const std::string& line) { said.push_back(line); };
      const auto fast = make_evaluator(file, o);
      const Prediction got = evaluate_structure(*fast, s);
      const std::string what = "atom_order " + order + (memory > 0 ? ", sums recomputed" : ", sums kept");
      testing::expect_same_prediction(got, want, kEnergyRelTol, kAbsTol, what);
      const auto spatial = std::count_if(said.begin(), said.end(), [](const std::string& l) {
        return l.rfind("atom order: the owned atoms along a space-filling curve", 0) == 0;
      });
      EXPECT_EQ(spatial, order == "auto" ? 1 : 0) << what;
      const auto plan = std::find_if(said.begin(), said.end(), [](const std::string& l) {
        return l.rfind("flashmace fast engine:", 0) == 0;
      });
      ASSERT_NE(plan, said.end()) << what;
      EXPECT_NE(plan->find(memory > 0 ? "message sums kept for 0 of 1 layers; the last layer's backward pass with its "
                                        "forward pass"
                                      : "message sums kept for 1 of 1 layers; the last layer's backward pass with its "
                                        "forward pass"),
                std::string::npos)
          << *plan;
    }
}

TEST(FastEngine, Tf32OutsideFloat32OnCudaIsAnError) {
  EngineOptions o;
  o.dtype = Dtype::Float64;
  o.tf32 = Choice::On;
  EXPECT_NE(testing::error_of([&] {
              make_evaluator(ModelFile::load(testing::exported_model("small_l1")), o);
            }).find("tf32 yes needs dtype float32 on a CUDA device"),
            std::string::npos);
}

// reassociate auto: the first interaction per sender element while at most
// reassociate_max_elements elements are present, else per edge, chosen again when a structure
// brings another count; both equal the reference path.
TEST(FastEngine, ReassociateAutoFollowsTheElementsPresent) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file("scalar_l0"));
  const Structure three = testing::reference_structure(ref, "bulk");
  Structure two = three;  // the bulk (H, C, O) with its oxygens made hydrogens
  const int z_first = *std::min_element(three.atomic_numbers.begin(), three.atomic_numbers.end());
  const int z_last = *std::max_element(three.atomic_numbers.begin(), three.atomic_numbers.end());
  for (int& z : two.atomic_numbers)
    if (z == z_last) z = z_first;
  EngineOptions o;
  o.dtype = Dtype::Float64;
  o.reassociate_max_elements = 2;
  std::vector<std::string> said;
  o.log = [&said](const std::string& line) {
    if (line.rfind("first interaction: ", 0) == 0) said.push_back(line);
  };
  const ModelFile file = ModelFile::load(testing::exported_model("scalar_l0"));
  const auto fast = make_evaluator(file, o);
  const auto reference = evaluator("scalar_l0", "reference");
  for (const Structure* s : std::initializer_list<const Structure*>{&three, &two, &three}) {
    const Prediction want = evaluate_structure(*reference, *s);
    testing::expect_same_prediction(evaluate_structure(*fast, *s), want, kEnergyRelTol, kAbsTol,
                                     s == &two ? "two elements" : "three elements");
  }
  ASSERT_EQ(said.size(), 3u);
  EXPECT_NE(said[0].find("per edge (3 elements present"), std::string::npos) << said[0];
  EXPECT_NE(said[1].find("per sender element (2 elements present"), std::string::npos) << said[1];
  EXPECT_NE(said[2].find("per edge (3 elements present"), std::string::npos) << said[2];
}

TEST(MemoryPlan, KeepsWhenTheIntermediatesFitElseRecomputes) {
  StageCosts c;
  c.kept_per_edge = 100;
  c.transient_per_edge = 50;
  c.kept_per_atom = 10;
  c.transient_per_atom = 20;
  c.sums_per_atom = {3, 3};
  const int64_t N = 1000, E = 100000;
  const double kept = 100.0 * E + 10.0 * N + 3.0 * 3 * N;  // (both layers' sums, one layer's gradient)
  const MemoryPlan all = plan_memory(c, N, E, kept + 50.0 * E, 0, 0);
  EXPECT_FALSE(all.recompute);
  EXPECT_EQ(all.edge_chunk, E);
  EXPECT_EQ(all.kept_sums, std::vector<bool>({true, true}));
  const MemoryPlan split = plan_memory(c, N, E, kept + 50.0 * 40000, 0, 0);
  EXPECT_FALSE(split.recompute);
  EXPECT_EQ(split.edge_chunk, 40000);
  EXPECT_LE(split.predicted_peak, kept + 50.0 * 40000);
  const double budget = kept + 50.0 * (kMinKeptEdgeChunk - 1);
  const MemoryPlan tight = plan_memory(c, N, E, budget, 0, 0);
  EXPECT_TRUE(tight.recompute);
  EXPECT_LE(tight.predicted_peak, budget);
  // 1e6 bytes: blocks of all edges do not fit, so no sums are kept; a block of n atoms holds
  // 100 n edges at 50 bytes and n atoms at 20: n = 1e6 / 5020.
  const MemoryPlan small = plan_memory(c, N, E, 1e6, 0, 0);
  EXPECT_TRUE(small.recompute);
  EXPECT_EQ(small.kept_sums, std::vector<bool>({false, false}));
  EXPECT_EQ(small.atom_chunk, 199);
  EXPECT_EQ(small.edge_chunk, 19920);
  EXPECT_LE(small.predicted_peak, 1e6);
  // Below one block of kMinBlockEdges the largest system keeps half the budget for its blocks (not
  // zero atoms, as a reservation of a full block made it say): 0.5e6 bytes at 100 edges per atom
  // of 1 byte each plus 10 per atom.
  c.resident_per_atom = 10;
  c.resident_per_edge = 1;
  EXPECT_EQ(plan_memory(c, N, E, 1e6, 0, 0).largest_atoms, static_cast<int64_t>(0.5e6 / 110.0));
  const MemoryPlan forced = plan_memory(c, N, E, 1e18, 7, 0);
  EXPECT_TRUE(forced.recompute);
  EXPECT_EQ(forced.edge_chunk, 7);
  EXPECT_EQ(forced.kept_sums, std::vector<bool>({true, true}));
}

TEST(MemoryPlan, KeepsTheMessageSumsOfAsManyLayersAsLeaveRoomForFullBlocks) {
  StageCosts c;
  c.kept_per_edge = 100;
  c.transient_per_edge = 50;
  c.transient_per_atom = 20;
  c.resident_per_atom = 10;
  c.sums_per_atom = {1000, 1000};
  const int64_t N = 100000, E = 10000000;  // 100 edges per atom
  const double resident = 10.0 * N, min_block = kMinBlockEdges * (50 + 20 / 100.0);
  const double budget = resident + 1000.0 * N + min_block + 1e6;  // one layer's sums and a full block
  const MemoryPlan p = plan_memory(c, N, E, budget, 0, 0);
  EXPECT_TRUE(p.recompute);
  EXPECT_EQ(p.kept_sums, std::vector<bool>({true, false}));
  EXPECT_GE(p.edge_chunk, kMinBlockEdges);
  EXPECT_LE(p.predicted_peak, budget);
  EXPECT_GE(p.predicted_peak, 0.99 * budget);
  // The largest system at 100 edges per atom: resident state plus one block of kMinBlockEdges.
  EXPECT_EQ(p.largest_atoms, static_cast<int64_t>((budget - min_block) / 10.0));
  EXPECT_NE(p.describe(N, E).find("message sums kept for 1 of 2 layers"), std::string::npos) << p.describe(N, E);
}

// Lowers the budget from `mib` by `factor` (down to `min_mib`) until the logged plan of small_l1 on
// `s` passes `wanted(plan line, edges, edge chunk)`, and checks that evaluation against the
// reference path. Returns whether some budget gave such a plan.
bool plan_from_a_budget_equals_reference(const Structure& s, double mib, double min_mib, double factor,
                                         const std::function<bool(const std::string&, long long, long long)>& wanted) {
  const ModelFile file = ModelFile::load(testing::exported_model("small_l1"));
  EngineOptions o;
  o.dtype = Dtype::Float64;
  o.path = EvaluationPath::Reference;
  const Prediction want = evaluate_structure(*make_evaluator(file, o), s);
  for (; mib >= min_mib; mib *= factor) {
    std::string plan;
    o.path = EvaluationPath::Fast;
    o.memory_bytes = mib * 1024 * 1024;
    o.log = [&](const std::string& line) {
      if (line.rfind("flashmace fast engine:", 0) == 0) plan = line;
    };
    const auto fast = make_evaluator(file, o);
    const Prediction got = evaluate_structure(*fast, s);
    long long atoms = 0, edges = 0, chunk = 0;
    EXPECT_EQ(std::sscanf(plan.c_str(), "flashmace fast engine: %lld atoms, %lld edges: edge chunk %lld", &atoms,
                          &edges, &chunk),
              3)
        << plan;
    if (!wanted(plan, edges, chunk)) continue;
    EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << plan;
    EXPECT_LE(testing::max_abs_diff(got.node_energy, want.node_energy), kAbsTol) << plan;
    EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol) << plan;
    EXPECT_LE(testing::max_abs_diff(flat(got.virial), flat(want.virial)), kAbsTol) << plan;
    return true;
  }
  return false;
}

// A budget between "everything in one chunk" and "recompute" makes the planner keep every chunk's
// intermediates while splitting the edges into several chunks: found by lowering the budget. (On the
// CPU the later layers then read layer 0's edge geometry chunk by chunk and hold its gradients for
// layer 0's backward pass.)
TEST(FastEngine, KeptIntermediatesInSeveralChunksEqualReference) {
  const Structure s = make_cubic_lattice("fcc", 3.61, 6, {28, 29}, 0.05, 5);  // 864 atoms, ~36k edges
  EXPECT_TRUE(plan_from_a_budget_equals_reference(s, 512, 64, 0.9, [](const std::string& plan, long long edges,
                                                                      long long chunk) {
    return plan.find("no recompute") != std::string::npos && chunk < edges;
  })) << "no budget gave a no-recompute plan with several edge chunks";
}

// A budget below one block of all edges makes the planner recompute every layer's message sums per
// node block.
TEST(FastEngine, StreamedMessageSumsFromTheBudgetEqualReference) {
  const Structure s = make_cubic_lattice("fcc", 3.61, 5, {28, 29}, 0.05, 7);  // 500 atoms
  EXPECT_TRUE(plan_from_a_budget_equals_reference(s, 256, 0.5, 0.7, [](const std::string& plan, long long edges,
                                                                      long long chunk) {
    return plan.find("message sums kept for 0 of 1 layers") != std::string::npos && chunk * 4 <= edges;
  })) << "no budget gave a plan recomputing the message sums in several blocks";
}

// The memory plan bounds what a step holds: for budgets from "everything kept in one chunk" down to
// recompute in blocks of a few atoms, the largest amount the CPU step holds at once in blocks of
// 1 MiB or more (the buffer cache's peak; the evaluation's own graph and outputs included) stays
// within the predicted peak the plan prints. (Leaving the edge topology and the radial pairs out of
// the per-edge count breaks this at the smallest budgets.)
TEST(FastEngine, StepHoldsNoMoreThanThePlanPredicts) {
  const Structure s = make_cubic_lattice("fcc", 3.61, 8, {28, 29}, 0.05, 3);  // 2,048 atoms, ~86k edges
  const ModelFile file = ModelFile::load(testing::exported_model("small_l1"));
  std::set<std::string> kinds;
  // (400 MiB: between the whole step at paired costs, ~440 MiB here, and recompute)
  for (const double mib : {2048.0, 400.0, 128.0, 32.0, 8.0, 2.0}) {
    EngineOptions o;
    o.dtype = Dtype::Float64;
    o.memory_bytes = mib * 1024 * 1024;
    std::string plan;
    o.log = [&](const std::string& line) {
      if (line.rfind("flashmace fast engine:", 0) == 0) plan = line;
    };
    const auto fast = make_evaluator(file, o);
    const CpuBufferCacheScope scope(true);
    reset_cpu_buffer_peak();
    const int64_t before = cpu_buffer_cache_stats().live_bytes;
    evaluate_structure(*fast, s);
    const double held = static_cast<double>(cpu_buffer_cache_stats().peak_live_bytes - before);
    long long atoms = 0, edges = 0, chunk = 0;
    ASSERT_EQ(std::sscanf(plan.c_str(), "flashmace fast engine: %lld atoms, %lld edges: edge chunk %lld", &atoms,
                          &edges, &chunk),
              3)
        << plan;
    const std::size_t at = plan.find("predicted peak ");
    ASSERT_NE(at, std::string::npos) << plan;
    const double predicted = std::stod(plan.substr(at + 15)) * 1024 * 1024;
    EXPECT_LE(held, predicted + 0.5 * 1024 * 1024) << plan << ": held " << held / 1048576.0 << " MiB";
    const bool recompute = plan.find("no recompute") == std::string::npos;
    const bool paired = plan.find("radial rows once per reverse-edge pair") != std::string::npos;
    // (a whole step on a list without ghosts: its prediction counts the radial rows per pair, so
    // that it stays close to what is held; counted per edge it is ~2.7x for MP-0-medium)
    if (paired) EXPECT_LE(predicted, 2.25 * held) << plan << ": held " << held / 1048576.0 << " MiB";
    kinds.insert(recompute         ? "recompute"
                 : chunk < edges ? "kept, several chunks"
                 : paired        ? "kept, one chunk, paired"
                                 : "kept, one chunk");
  }
  EXPECT_TRUE(kinds.count("kept, one chunk, paired"));
  EXPECT_TRUE(kinds.count("kept, several chunks"));
  EXPECT_TRUE(kinds.count("recompute"));
}

// A whole-step plan at paired costs assumes that every edge's reverse is in the list. An edge set
// without ghosts that has none (half of a neighbour list) is found at the first step, said, and
// planned per edge from the next, which then holds no more than it predicts.
TEST(FastEngine, HalfListIsPlannedPerEdgeAfterItsFirstStep) {
  const Structure s = make_cubic_lattice("fcc", 3.61, 6, {28, 29}, 0.05, 3);  // 864 atoms
  const ModelFile file = ModelFile::load(testing::exported_model("small_l1"));
  EngineOptions o;
  o.dtype = Dtype::Float64;
  std::vector<std::string> plans, notes;
  o.log = [&](const std::string& line) {
    if (line.rfind("flashmace fast engine:", 0) == 0) plans.push_back(line);
    if (line.rfind("memory plan:", 0) == 0) notes.push_back(line);
  };
  const auto fast = make_evaluator(file, o);
  const Graph full = build_neighbor_list(s, fast->cutoff());
  Graph half;
  half.num_nodes = full.num_nodes;
  for (int e = 0; e < full.num_edges(); ++e) {
    const int* k = &full.unit_shifts[3 * e];
    const auto key = std::make_tuple(full.sender[e], k[0], k[1], k[2]);
    if (key < std::make_tuple(full.receiver[e], 0, 0, 0)) continue;  // (its reverse stays)
    half.sender.push_back(full.sender[e]);
    half.receiver.push_back(full.receiver[e]);
    half.unit_shifts.insert(half.unit_shifts.end(), k, k + 3);
  }
  ASSERT_EQ(2 * half.num_edges(), full.num_edges());
  const CpuBufferCacheScope scope(true);
  evaluate_structure(*fast, s, half);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_NE(plans[0].find("radial rows once per reverse-edge pair"), std::string::npos) << plans[0];
  ASSERT_EQ(notes.size(), 1u);
  reset_cpu_buffer_peak();
  const int64_t before = cpu_buffer_cache_stats().live_bytes;
  evaluate_structure(*fast, s, half);
  const double held = static_cast<double>(cpu_buffer_cache_stats().peak_live_bytes - before);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[1].find("radial rows once per reverse-edge pair"), std::string::npos) << plans[1];
  const double predicted = std::stod(plans[1].substr(plans[1].find("predicted peak ") + 15)) * 1024 * 1024;
  EXPECT_LE(held, predicted + 0.5 * 1024 * 1024) << plans[1];
  EXPECT_EQ(notes.size(), 1u);
}

class FastEngineDomain : public ::testing::TestWithParam<std::string> {};


TEST_P(FastEngineDomain, GhostDomainEqualsReferenceIncludingPerAtomVirials) {
  const Structure s = testing::reference_structure(SafetensorsFile::load(testing::reference_file(GetParam())), "bulk");
  const auto reference = evaluator(GetParam(), "reference");
  std::vector<int> owner;
  const LocalGraph lg = periodic_local_graph(s, reference->cutoff(), &owner);
  ASSERT_GT(lg.nghost, 0);
  OwnerMapExchanger exchanger(lg.nlocal, owner);
  const LocalPrediction want = evaluate_local(*reference, lg, &exchanger, true);
  // (local-local edges pair up; an edge from a ghost has no reverse in this domain and stays single)
  for (const std::string pairs : {"on", "off"})
    for (const int64_t chunk : {int64_t{0}, int64_t{13}, int64_t{-13}}) {
      // (-13: chunks of 13 and a one-byte budget: every layer's message sums recomputed per block)
      const int64_t n = std::abs(chunk);
      const LocalPrediction got =
          evaluate_local(*evaluator(GetParam(), "fast", n, n, pairs, chunk < 0 ? 1 : 0), lg, &exchanger, true);
      const std::string what = pairs + " " + std::to_string(chunk);
      EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << what;
      EXPECT_LE(testing::max_abs_diff(got.node_energy, want.node_energy), kAbsTol) << what;
      EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol) << what;
      EXPECT_LE(testing::max_abs_diff(flat(got.virial), flat(want.virial)), kAbsTol) << what;
      EXPECT_LE(testing::max_abs_diff(got.atom_virial, want.atom_virial), kAbsTol) << what;
    }
  // In place (the exchanger names the ghosts' owners): the same numbers, no staged exchange; in
  // chunks, with the owned atoms in the engine's spatial order (the owners renamed).
  for (const int64_t chunk : {int64_t{0}, int64_t{13}}) {
    testing::LocalOwnersExchanger in_place(lg.nlocal, owner);
    const auto fast = evaluator(GetParam(), "fast", chunk, chunk);
    const LocalPrediction got = evaluate_local(*fast, lg, &in_place, true);
    const std::string what = "in place, chunks of " + std::to_string(chunk);
    EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << what;
    EXPECT_LE(testing::max_abs_diff(got.node_energy, want.node_energy), kAbsTol) << what;
    EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol) << what;
    EXPECT_LE(testing::max_abs_diff(flat(got.virial), flat(want.virial)), kAbsTol) << what;
    EXPECT_LE(testing::max_abs_diff(got.atom_virial, want.atom_virial), kAbsTol) << what;
    EXPECT_EQ(in_place.staged, 0) << what;
    EXPECT_EQ(in_place.local_forward, fast->config().num_interactions - 1) << what;
    EXPECT_EQ(in_place.local_reverse, fast->config().num_interactions - 1) << what;
  }
  const auto fast = evaluator(GetParam(), "fast");
  // Rows handed over in the model's memory (the Kokkos style's exchanger), both paths: the same
  // numbers, every exchange through that exchanger.
  for (const std::string path : {"fast", "reference"}) {
    testing::ModelMemoryExchanger there(lg.nlocal, lg.ntotal(), owner, at::kCPU);
    const LocalPrediction m = evaluate_local(*evaluator(GetParam(), path), lg, &there, true);
    EXPECT_LE(std::abs(m.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << path;
    EXPECT_LE(testing::max_abs_diff(m.forces, want.forces), kAbsTol) << path;
    EXPECT_LE(testing::max_abs_diff(m.atom_virial, want.atom_virial), kAbsTol) << path;
    EXPECT_EQ(there.calls, 2 * (fast->config().num_interactions - 1)) << path;
  }
  // Negative control: without the exchange, ghost features are stale and the energy is wrong.
  const LocalPrediction stale = evaluate_local(*evaluator(GetParam(), "fast"), lg, nullptr, false);
  EXPECT_GT(std::abs(stale.energy - want.energy), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(SharedReference, FastEngineDomain, ::testing::Values("small_l1", "scalar_l0", "large_l2"),
                         [](const auto& info) { return info.param; });

// Counts the exchanger's calls: the engine makes the same calls whether or not a domain has edges.
class CountingExchanger : public HaloExchanger {
 public:
  void forward(double*, int) override { ++forward_calls; }
  void reverse(double*, int) override { ++reverse_calls; }
  int forward_calls = 0, reverse_calls = 0;
};

TEST(FastEngine, ExchangesOncePerLayerBoundaryEvenWithoutEdges) {
  const auto fast = evaluator("small_l1", "fast");
  const int layers = fast->config().num_interactions;
  LocalGraph empty;
  CountingExchanger counter;
  evaluate_local(*fast, empty, &counter, false);
  EXPECT_EQ(counter.forward_calls, layers - 1);
  EXPECT_EQ(counter.reverse_calls, layers - 1);
  LocalGraph lonely;  // one atom, no neighbours
  lonely.nlocal = 1;
  lonely.atomic_numbers = {fast->config().atomic_numbers[0]};
  lonely.positions = {0, 0, 0};
  CountingExchanger counter2;
  const LocalPrediction p = evaluate_local(*fast, lonely, &counter2, false);
  EXPECT_EQ(counter2.forward_calls, layers - 1);
  EXPECT_EQ(counter2.reverse_calls, layers - 1);
  EXPECT_EQ(p.forces, std::vector<double>({0, 0, 0}));
  EXPECT_TRUE(std::isfinite(p.energy));
}

TEST(FastEngine, EnergyOnlyRequestGivesTheSameEnergy) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file("small_l1"));
  const Structure s = testing::reference_structure(ref, "bulk");
  const Graph g = testing::reference_graph(ref, "bulk");
  auto fast = evaluator("small_l1", "fast", 11, 0);
  const Prediction full = evaluate_structure(*fast, s, g);
  // Energy only through the interface (no forces, no virial).
  std::vector<int64_t> species = element_indices(fast->config(), s);
  std::vector<double> v(3 * g.sender.size());
  for (std::size_t e = 0; e < g.sender.size(); ++e)
    for (int d = 0; d < 3; ++d) {
      double shift = 0;
      for (int k = 0; k < 3; ++k) shift += g.unit_shifts[3 * e + k] * s.cell[3 * k + d];
      v[3 * e + d] = s.positions[3 * g.receiver[e] + d] - s.positions[3 * g.sender[e] + d] + shift;
    }
  GraphView view;
  view.nlocal = view.ntotal = s.size();
  view.nedges = static_cast<int64_t>(g.sender.size());
  view.species = species.data();
  view.sender = g.sender.data();
  view.receiver = g.receiver.data();
  view.vectors = v.data();
  double energy = 0;
  Request req;
  req.forces = false;
  Outputs out;
  out.energy = &energy;
  fast->evaluate(view, nullptr, req, out);
  EXPECT_LE(std::abs(energy - full.energy) / std::abs(full.energy), kEnergyRelTol);
}

TEST(FastEngine, BadOptionsAreExplained) {
  const ModelFile file = ModelFile::load(testing::exported_model("small_l1"));
  EngineOptions o;
  o.edge_chunk = -3;
  EXPECT_NE(testing::error_of([&] { make_evaluator(file, o); }).find("Chunk sizes must be positive"),
            std::string::npos);
  o.edge_chunk = 0;
  o.device = "tpu";
  EXPECT_NE(testing::error_of([&] { make_evaluator(file, o); }).find("device tpu: use cpu, cuda or cuda:N"),
            std::string::npos);
}

}  // namespace
}  // namespace flashmace

namespace flashmace {
namespace {

TEST(FastEngine, SingleElementSystemEqualsReference) {
  // One element present: the skip connection takes its plain-GEMM branch (no per-element rows).
  for (const std::string model : {"small_l1", "large_l2"}) {
    const auto reference = evaluator(model, "reference");
    const Structure s = make_cubic_lattice("fcc", 3.61, 2, {reference->config().atomic_numbers.front()}, 0.1, 7);
    const Prediction want = evaluate_structure(*reference, s);
    const Prediction got = evaluate_structure(*evaluator(model, "fast", 50, 7), s);
    EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << model;
    EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol) << model;
    EXPECT_LE(testing::max_abs_diff(flat(got.virial), flat(want.virial)), kAbsTol) << model;
  }
}

// The fused per-edge geometry of a plain model against edge_terms.h's ATen formulation, forward and
// backward, lengths up to r_max: with MACE's Bessel frequencies (multiples of the first: the CPU loop
// takes the sines and cosines by recurrence) and with frequencies that are not (one sin and cos each),
// in float64 and float32.
TEST(FastEngine, FusedGeometryEqualsAtenWithAndWithoutMultipleFrequencies) {
  const ModelFile file =
      ModelFile::load(std::string(FLASHMACE_SOURCE_DIR) + "/potentials/testing/tiny-cuni-random.safetensors");
  for (const bool multiples : {true, false})
    for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
      SCOPED_TRACE(std::string(multiples ? "multiples" : "other frequencies") + ", " + at::toString(dtype));
      MaceParams m64 = MaceParams::load(file, at::kDouble, at::kCPU), m = MaceParams::load(file, dtype, at::kCPU);
      const at::Tensor w = m64.bessel_weights;
      if (!multiples) m64.bessel_weights = w * (1 + 0.01 * at::arange(w.size(0), w.options()));
      m.bessel_weights = m64.bessel_weights.to(dtype);
      const EdgeGeometryOp op(m);
      ASSERT_TRUE(op.fused());
      const int64_t E = 301;
      const at::Generator gen = at::detail::createCPUGenerator(5);
      const at::Tensor u = at::randn({E, 3}, gen, at::kDouble);
      const at::Tensor len = at::empty({E, 1}, at::kDouble).uniform_(0.3, m.config.r_max * 1.02, gen);
      const at::Tensor v64 = u / at::linalg_vector_norm(u, 2, {1}, true) * len, v = v64.to(dtype);
      const EdgeGeometry fused = op.forward(v, {}, {}), aten = edge_geometry(m64, v.to(at::kDouble), {}, {});
      const double tol = dtype == at::kDouble ? 1e-13 : 2e-5;
      EXPECT_LE(at::max(at::abs(fused.sh.to(at::kDouble) - aten.sh)).item<double>(), tol);
      EXPECT_LE(at::max(at::abs(fused.ef.to(at::kDouble) - aten.ef)).item<double>(), tol);
      const at::Tensor gsh = at::randn_like(aten.sh), gef = at::randn_like(aten.ef);
      const at::Tensor dv_fused = op.vjp(fused, gsh.to(dtype), gef.to(dtype)), dv_aten = edge_geometry_vjp(m64, aten, gsh, gef);
      EXPECT_LE(at::max(at::abs(dv_fused.to(at::kDouble) - dv_aten)).item<double>(), dtype == at::kDouble ? 1e-12 : 1e-4);
      EXPECT_GT(at::max(at::abs(dv_aten)).item<double>(), 1e-3);  // (the comparison is not of zeros)
    }
}

// MACE-MP-0b and later (Density blocks, Agnesi transform, ZBL): the fused per-edge geometry runs the
// transform and the ZBL term, equal to edge_terms.h's ATen formulation forward and backward, and the
// engine equals the reference path on a compressed lattice (pairs inside the ZBL range).
TEST(FastEngine, AgnesiModelRunsTheFusedGeometryAndEqualsReference) {
  const std::string path = std::string(FLASHMACE_SOURCE_DIR) + "/potentials/testing/tiny-cuni-agnesi-random.safetensors";
  const ModelFile file = ModelFile::load(path);
  ASSERT_EQ(file.config().distance_transform, "Agnesi");
  const MaceParams m = MaceParams::load(file, at::kDouble, at::kCPU);
  const EdgeGeometryOp op(m);
  ASSERT_TRUE(op.fused());
  const int64_t E = 257;
  const at::Generator gen = at::detail::createCPUGenerator(11);
  const at::Tensor u = at::randn({E, 3}, gen, at::kDouble);
  const at::Tensor v = u / at::linalg_vector_norm(u, 2, {1}, true) * at::empty({E, 1}, at::kDouble).uniform_(0.5, 4.6, gen);
  const at::Tensor zs = at::randint(28, 30, {E}, gen, at::kLong), zr = at::randint(28, 30, {E}, gen, at::kLong);
  const EdgeGeometry fused = op.forward(v, zs, zr), aten = edge_geometry(m, v, zs, zr);
  EXPECT_LE(at::max(at::abs(fused.sh - aten.sh)).item<double>(), 1e-14);
  EXPECT_LE(at::max(at::abs(fused.ef - aten.ef)).item<double>(), 1e-13);  // (pow in another order)
  const at::Tensor gsh = at::randn_like(aten.sh), gef = at::randn_like(aten.ef);
  const at::Tensor dv_fused = op.vjp(fused, gsh, gef), dv_aten = edge_geometry_vjp(m, aten, gsh, gef);
  EXPECT_LE(at::max(at::abs(dv_fused - dv_aten)).item<double>(), 1e-12);
  EXPECT_GT(at::max(at::abs(dv_aten)).item<double>(), 1e-3);  // (the comparison is not of zeros)
  // The fused ZBL pass against edge_terms.h's (energies of up to ~1e3 eV at 0.5 A: relative).
  const auto [zbl_e, zbl_slope] = op.zbl(v, zs, zr);
  const auto [want_e, want_slope] =
      zbl_energy_and_derivative(at::linalg_vector_norm(v, 2, {1}, true), zs, zr, m.zbl_params);
  const double e_scale = at::max(at::abs(want_e)).item<double>(), s_scale = at::max(at::abs(want_slope)).item<double>();
  EXPECT_GT(e_scale, 1.0);
  EXPECT_LE(at::max(at::abs(zbl_e - want_e)).item<double>(), 1e-13 * e_scale);
  EXPECT_LE(at::max(at::abs(zbl_slope - want_slope)).item<double>(), 1e-13 * s_scale);

  EngineOptions o;
  o.dtype = Dtype::Float64;
  set_engine_option(o, "path", "reference");
  const auto reference = make_evaluator(file, o);
  set_engine_option(o, "path", "fast");
  const auto fast = make_evaluator(file, o);
  const Structure s = make_cubic_lattice("fcc", 3.0, 2, {28, 29}, 0.15, 5);
  const Prediction want = evaluate_structure(*reference, s), got = evaluate_structure(*fast, s);
  EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol);
  EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol);
  EXPECT_LE(testing::max_abs_diff(flat(got.virial), flat(want.virial)), kAbsTol);
}

}  // namespace
}  // namespace flashmace
