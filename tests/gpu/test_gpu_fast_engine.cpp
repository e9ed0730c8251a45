// The fast engine on a CUDA GPU: equals the CPU reference path (float64) for several chunk sizes
// (down to one edge and one receiver row, message sums kept or recomputed per block) and
// on a ghost-atom domain; float32 forces stay within 1e-4 (norm-wise) of float64; two runs give
// bitwise-identical forces. Skipped, and reported as skipped, where no GPU exists.
#include <gtest/gtest.h>

#include <cmath>

#include "core/lattice.h"
#include "core/local_graph.h"
#include "core/model_file.h"
#include "engine/host_evaluation.h"
#include "model/device.h"
#include "test_support.h"

namespace flashmace {
namespace {

// Different reduction orders (cuBLAS, segment reductions) change float64 round-off only.
constexpr double kAbsTol = 1e-10;
constexpr double kEnergyRelTol = 1e-12;
// float32 carries ~1e-7 relative per operation; a few thousand operations per force stay far below.
constexpr double kFloat32ForceRelTol = 1e-4;

std::unique_ptr<Evaluator> evaluator(const std::string& model, const std::string& path, const std::string& device,
                                     const std::string& dtype = "float64", int64_t chunk = 0,
                                     const std::string& radial_pairs = "auto") {
  EngineOptions o;
  set_engine_option(o, "path", path);
  o.device = device;
  set_engine_option(o, "dtype", dtype);
  // (negative: chunks of -chunk and a one-byte budget, so that every layer's message sums are
  // recomputed per node block)
  o.edge_chunk = o.atom_chunk = std::abs(chunk);
  if (chunk < 0) o.memory_bytes = 1;
  set_engine_option(o, "radial_pairs", radial_pairs);
  return make_evaluator(ModelFile::load(testing::exported_model(model)), o);
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

class GpuFastCase : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  }
};

TEST_P(GpuFastCase, CudaFastEqualsCpuReference) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  const auto cpu = evaluator(GetParam(), "reference", "cpu");
  // (these graphs are small: "auto" leaves the radial MLP unshared on a GPU; "on" shares it per pair)
  for (const std::string pairs : {"auto", "on"})
    for (const int64_t chunk : {int64_t{0}, int64_t{7}, int64_t{64}, int64_t{-1}, int64_t{-7}}) {
      const auto gpu = evaluator(GetParam(), "fast", "cuda", "float64", chunk, pairs);
      for (const std::string which : {"bulk", "cluster"}) {
        const Structure s = testing::reference_structure(ref, which);
        const Graph g = testing::reference_graph(ref, which);
        const Prediction pc = evaluate_structure(*cpu, s, g), pg = evaluate_structure(*gpu, s, g);
        EXPECT_LE(std::abs(pg.energy - pc.energy) / std::abs(pc.energy), kEnergyRelTol) << which << chunk;
        EXPECT_LE(testing::max_abs_diff(pg.forces, pc.forces), kAbsTol) << which << chunk;
        EXPECT_LE(testing::max_abs_diff(pg.node_energy, pc.node_energy), kAbsTol) << which << chunk;
        const std::vector<double> wg(pg.virial.begin(), pg.virial.end()), wc(pc.virial.begin(), pc.virial.end());
        EXPECT_LE(testing::max_abs_diff(wg, wc), kAbsTol) << which << chunk;
      }
    }
}

TEST_P(GpuFastCase, CudaGhostDomainEqualsCpuReference) {
  const Structure s = testing::reference_structure(SafetensorsFile::load(testing::reference_file(GetParam())), "bulk");
  const auto cpu = evaluator(GetParam(), "reference", "cpu");
  std::vector<int> owner;
  const LocalGraph lg = periodic_local_graph(s, cpu->cutoff(), &owner);
  OwnerMapExchanger exchanger(lg.nlocal, owner);
  const LocalPrediction want = evaluate_local(*cpu, lg, &exchanger, true);
  for (const std::string pairs : {"auto", "on"}) {
    const LocalPrediction got =
        evaluate_local(*evaluator(GetParam(), "fast", "cuda", "float64", 13, pairs), lg, &exchanger, true);
    EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << pairs;
    EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol) << pairs;
    EXPECT_LE(testing::max_abs_diff(got.atom_virial, want.atom_virial), kAbsTol) << pairs;
  }
  // The exchange in place on the GPU (the exchanger names the ghosts' owners), also bit for bit on
  // a repeat.
  testing::LocalOwnersExchanger in_place(lg.nlocal, owner);
  const auto fast = evaluator(GetParam(), "fast", "cuda", "float64", 13, "on");
  const LocalPrediction got = evaluate_local(*fast, lg, &in_place, true);
  EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol);
  EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol);
  EXPECT_LE(testing::max_abs_diff(got.atom_virial, want.atom_virial), kAbsTol);
  EXPECT_EQ(evaluate_local(*fast, lg, &in_place, true).forces, got.forces);
  EXPECT_EQ(in_place.staged, 0);
  // Rows handed over in GPU memory (the Kokkos style's exchanger on CUDA), both paths.
  for (const std::string path : {"fast", "reference"}) {
    testing::ModelMemoryExchanger there(lg.nlocal, lg.ntotal(), owner, at::Device(at::kCUDA, 0));
    const LocalPrediction m =
        evaluate_local(*evaluator(GetParam(), path, "cuda", "float64", 13, "on"), lg, &there, true);
    EXPECT_LE(std::abs(m.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << path;
    EXPECT_LE(testing::max_abs_diff(m.forces, want.forces), kAbsTol) << path;
    EXPECT_LE(testing::max_abs_diff(m.atom_virial, want.atom_virial), kAbsTol) << path;
    EXPECT_EQ(there.calls, 2 * (fast->config().num_interactions - 1)) << path;
  }
}

TEST_P(GpuFastCase, Float32ForcesCloseToFloat64AndBitwiseReproducible) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  const Structure s = testing::reference_structure(ref, "bulk");
  const Graph g = testing::reference_graph(ref, "bulk");
  const Prediction p64 = evaluate_structure(*evaluator(GetParam(), "fast", "cuda", "float64"), s, g);
  const auto f32 = evaluator(GetParam(), "fast", "cuda", "float32", 7, "on");
  const Prediction a = evaluate_structure(*f32, s, g), b = evaluate_structure(*f32, s, g);
  std::vector<double> diff(p64.forces.size());
  for (std::size_t i = 0; i < diff.size(); ++i) diff[i] = a.forces[i] - p64.forces[i];
  EXPECT_LE(norm(diff) / norm(p64.forces), kFloat32ForceRelTol);
  EXPECT_EQ(a.forces, b.forces);  // bitwise: no atomics in any reduction
  EXPECT_EQ(a.energy, b.energy);
}

// The same domain with its atoms renumbered (node i becomes renumber(i); owned atoms stay owned,
// ghosts stay ghosts), as LAMMPS does when it sorts its atoms at a run's setup or makes new ghosts
// at a neighbour-list rebuild: the same counts, other numbers. ghost_owner is renumbered alike.
template <class Renumber>
LocalGraph renumbered(const LocalGraph& lg, Renumber renumber, std::vector<int>* ghost_owner) {
  LocalGraph r = lg;
  const int n = lg.nlocal;
  std::vector<int> owner(ghost_owner->size());
  for (int i = 0; i < lg.ntotal(); ++i) {
    const auto to = static_cast<std::size_t>(renumber(i)), from = static_cast<std::size_t>(i);
    r.atomic_numbers[to] = lg.atomic_numbers[from];
    for (std::size_t d = 0; d < 3; ++d) r.positions[3 * to + d] = lg.positions[3 * from + d];
    if (i >= n) owner[to - n] = static_cast<int>(renumber((*ghost_owner)[from - n]));
  }
  for (int64_t& s : r.sender) s = renumber(s);
  for (int64_t& s : r.receiver) s = renumber(s);
  *ghost_owner = owner;
  return r;
}

// A replayed step after the owned atoms were reordered (same sizes, so the captured graph is
// reused with the new topology copied into its tensors) equals the eager engine on the reordered
// domain, with each of the engine's optional parts switched off in turn.
TEST_P(GpuFastCase, CudaGraphReplayFollowsReorderedAtoms) {
  const Structure bulk = testing::reference_structure(SafetensorsFile::load(testing::reference_file(GetParam())), "bulk");
  const ModelFile file = ModelFile::load(testing::exported_model(GetParam()));
  std::vector<int> owner;
  const LocalGraph lg = periodic_local_graph(bulk, file.config().r_max, &owner);
  std::vector<int> owner2 = owner;
  const int n = lg.nlocal;
  const LocalGraph lg2 = renumbered(lg, [n](int64_t i) { return i < n ? n - 1 - i : i; }, &owner2);
  for (const std::string variant :
       {"default", "radial_pairs off", "side_stream off", "reassociate off", "reassociate auto per edge", "sc generic"}) {
    EngineOptions o;
    o.device = "cuda";
    o.dtype = Dtype::Float64;
    if (variant == "radial_pairs off") o.radial_pairs = Choice::Off;
    if (variant == "side_stream off") o.side_stream = false;
    if (variant == "reassociate off") o.reassociate = Choice::Off;
    if (variant == "reassociate auto per edge") o.reassociate_max_elements = 1;  // (the bulk has more)
    if (variant == "sc generic") o.sc = ScExecutorKind::Generic;
    int captures = 0;
    o.log = [&captures](const std::string& line) { captures += line.find("CUDA graph captured") != std::string::npos; };
    const auto graphed = make_evaluator(file, o);
    o.cuda_graph = false;
    const auto eager = make_evaluator(file, o);
    for (const bool in_place : {true, false}) {
      const std::string what = variant + (in_place ? ", in place" : ", exchanger");
      testing::LocalOwnersExchanger local(lg.nlocal, owner), local2(lg2.nlocal, owner2);
      OwnerMapExchanger mapped(lg.nlocal, owner), mapped2(lg2.nlocal, owner2);
      HaloExchanger* first = in_place ? static_cast<HaloExchanger*>(&local) : &mapped;
      HaloExchanger* second = in_place ? static_cast<HaloExchanger*>(&local2) : &mapped2;
      const LocalPrediction want = evaluate_local(*eager, lg2, &mapped2, true);
      evaluate_local(*graphed, lg, first, true);
      evaluate_local(*graphed, lg, first, true);
      const int before = captures;
      const LocalPrediction got = evaluate_local(*graphed, lg2, second, true);
      EXPECT_EQ(captures, before) << what << ": reordered atoms keep the sizes: a replay";
      EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << what;
      EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol) << what;
      EXPECT_LE(testing::max_abs_diff(got.atom_virial, want.atom_virial), kAbsTol) << what;
    }
  }
}

// CUDA-graph replay (cuda_graph on, one chunk, radial MLP per edge) equals the eager engine: on its
// capture, on replays (bitwise equal to each other), after a new topology of the same bucket (copied
// into the captured tensors, no new capture), on another structure (a new capture) and on a
// ghost-atom domain (segments with the halo exchanges between them).
TEST_P(GpuFastCase, CudaGraphReplayEqualsEagerEngine) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  EngineOptions o;
  o.device = "cuda";
  o.dtype = Dtype::Float64;
  o.radial_pairs = Choice::Off;
  int captures = 0;
  o.log = [&captures](const std::string& line) { captures += line.find("CUDA graph captured") != std::string::npos; };
  const ModelFile file = ModelFile::load(testing::exported_model(GetParam()));
  const auto graphed = make_evaluator(file, o);
  o.cuda_graph = false;
  const auto eager = make_evaluator(file, o);
  auto expect_same = [](const Prediction& got, const Prediction& want, const std::string& what) {
    testing::expect_same_prediction(got, want, kEnergyRelTol, kAbsTol, what);
  };
  const Structure bulk = testing::reference_structure(ref, "bulk"), cluster = testing::reference_structure(ref, "cluster");
  const Graph gb = testing::reference_graph(ref, "bulk"), gc = testing::reference_graph(ref, "cluster");
  const Prediction want = evaluate_structure(*eager, bulk, gb);
  const Prediction first = evaluate_structure(*graphed, bulk, gb);
  EXPECT_EQ(captures, 1);
  expect_same(first, want, "capture");
  const Prediction second = evaluate_structure(*graphed, bulk, gb), third = evaluate_structure(*graphed, bulk, gb);
  expect_same(second, want, "replay");
  EXPECT_EQ(second.forces, third.forces);
  EXPECT_EQ(second.energy, third.energy);
  EXPECT_EQ(captures, 1) << "replays must not capture again";
  expect_same(evaluate_structure(*graphed, bulk, reversed_edges(gb)),
              evaluate_structure(*eager, bulk, reversed_edges(gb)),
              "new topology, same bucket");
  EXPECT_EQ(captures, 1) << "a topology of the same bucket reuses the graph";
  expect_same(evaluate_structure(*graphed, cluster, gc), evaluate_structure(*eager, cluster, gc), "cluster");
  EXPECT_EQ(captures, 2);

  std::vector<int> owner;
  const LocalGraph lg = periodic_local_graph(bulk, eager->cutoff(), &owner);
  OwnerMapExchanger exchanger(lg.nlocal, owner);
  const LocalPrediction lw = evaluate_local(*eager, lg, &exchanger, true);
  for (int call = 0; call < 2; ++call) {
    const LocalPrediction lgot = evaluate_local(*graphed, lg, &exchanger, true);
    EXPECT_LE(std::abs(lgot.energy - lw.energy) / std::abs(lw.energy), kEnergyRelTol) << call;
    EXPECT_LE(testing::max_abs_diff(lgot.forces, lw.forces), kAbsTol) << call;
    EXPECT_LE(testing::max_abs_diff(lgot.atom_virial, lw.atom_virial), kAbsTol) << call;
  }
  EXPECT_EQ(captures, 3);

  // In place on the GPU (the exchanger names the owners): the exchanges run between the captured
  // segments, so the same graph is replayed. Then the ghosts renumbered: the topology keeps its
  // bucket, still a replay, and the exchanges must gather by the new owners.
  testing::LocalOwnersExchanger in_place(lg.nlocal, owner);
  for (int call = 0; call < 2; ++call) {
    const LocalPrediction lgot = evaluate_local(*graphed, lg, &in_place, true);
    EXPECT_LE(testing::max_abs_diff(lgot.forces, lw.forces), kAbsTol) << "in place " << call;
  }
  EXPECT_EQ(captures, 3);
  std::vector<int> owner2 = owner;
  const int64_t n = lg.nlocal, last = lg.ntotal() - 1;
  const LocalGraph lg2 = renumbered(lg, [n, last](int64_t i) { return i < n ? i : n + last - i; }, &owner2);
  OwnerMapExchanger exchanger2(lg2.nlocal, owner2);
  testing::LocalOwnersExchanger in_place2(lg2.nlocal, owner2);
  const LocalPrediction lw2 = evaluate_local(*eager, lg2, &exchanger2, true);
  const LocalPrediction lgot2 = evaluate_local(*graphed, lg2, &in_place2, true);
  EXPECT_EQ(captures, 3) << "renumbered ghosts keep the bucket: a replay";
  EXPECT_LE(std::abs(lgot2.energy - lw2.energy) / std::abs(lw2.energy), kEnergyRelTol);
  EXPECT_LE(testing::max_abs_diff(lgot2.forces, lw2.forces), kAbsTol);
  EXPECT_LE(testing::max_abs_diff(lgot2.atom_virial, lw2.atom_virial), kAbsTol);
  EXPECT_EQ(in_place2.staged, 0);
}

// The later layers' radial MLPs on a second stream (side_stream on, the default) equal one stream:
// eager and replayed, with and without a halo exchange (the streams then join before each exchange).
// With two layers the sums meet in the same order, so the forces are equal bit for bit.
TEST_P(GpuFastCase, SideStreamEqualsOneStream) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  const ModelFile file = ModelFile::load(testing::exported_model(GetParam()));
  const Structure bulk = testing::reference_structure(ref, "bulk");
  const Graph gb = testing::reference_graph(ref, "bulk");
  std::vector<int> owner;
  const LocalGraph lg = periodic_local_graph(bulk, evaluator(GetParam(), "fast", "cuda")->cutoff(), &owner);
  OwnerMapExchanger exchanger(lg.nlocal, owner);
  for (const std::string graph : {"off", "on"}) {
    EngineOptions o;
    o.device = "cuda";
    o.dtype = Dtype::Float64;
    o.cuda_graph = graph == "on";
    o.side_stream = false;
    const auto one = make_evaluator(file, o);
    o.side_stream = true;
    const auto two = make_evaluator(file, o);
    const bool bitwise = file.config().num_interactions == 2;
    const Prediction want = evaluate_structure(*one, bulk, gb);
    for (int call = 0; call < 2; ++call) {
      const Prediction got = evaluate_structure(*two, bulk, gb);
      testing::expect_same_prediction(got, want, kEnergyRelTol, kAbsTol, "graph " + graph);
      if (bitwise) EXPECT_EQ(got.forces, want.forces) << graph;
    }
    const LocalPrediction lw = evaluate_local(*one, lg, &exchanger, true);
    const LocalPrediction lgot = evaluate_local(*two, lg, &exchanger, true);
    EXPECT_LE(std::abs(lgot.energy - lw.energy) / std::abs(lw.energy), kEnergyRelTol) << graph;
    EXPECT_LE(testing::max_abs_diff(lgot.forces, lw.forces), kAbsTol) << graph;
    EXPECT_LE(testing::max_abs_diff(lgot.atom_virial, lw.atom_virial), kAbsTol) << graph;
    if (bitwise) EXPECT_EQ(lgot.forces, lw.forces) << graph;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedReference, GpuFastCase, ::testing::Values("small_l1", "scalar_l0", "large_l2"),
                         [](const auto& info) { return info.param; });

// MACE-MP-0b and later (Density blocks, Agnesi transform, ZBL): the fused CUDA geometry with the
// transform equals the CPU reference path, float64, with and without CUDA graphs.
TEST(GpuFastEngine, AgnesiModelEqualsCpuReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  const ModelFile file =
      ModelFile::load(std::string(FLASHMACE_SOURCE_DIR) + "/potentials/testing/tiny-cuni-agnesi-random.safetensors");
  EngineOptions o;
  o.dtype = Dtype::Float64;
  set_engine_option(o, "path", "reference");
  const auto cpu = make_evaluator(file, o);
  const Structure s = make_cubic_lattice("fcc", 3.0, 3, {28, 29}, 0.15, 5);  // pairs inside the ZBL range
  const Prediction pc = evaluate_structure(*cpu, s);
  set_engine_option(o, "path", "fast");
  o.device = "cuda";
  for (const std::string graph : {"on", "off"}) {
    set_engine_option(o, "cuda_graph", graph);
    const auto gpu = make_evaluator(file, o);
    for (int step = 0; step < 2; ++step) {  // (the second replays the captured graph)
      const Prediction pg = evaluate_structure(*gpu, s);
      EXPECT_LE(std::abs(pg.energy - pc.energy) / std::abs(pc.energy), kEnergyRelTol) << graph;
      EXPECT_LE(testing::max_abs_diff(pg.forces, pc.forces), kAbsTol) << graph;
      const std::vector<double> wg(pg.virial.begin(), pg.virial.end()), wc(pc.virial.begin(), pc.virial.end());
      EXPECT_LE(testing::max_abs_diff(wg, wc), kAbsTol) << graph;
    }
  }
}

// MACE-MH-1's options (NonLinear blocks, edge irreps, agnostic product, envelope inside the
// interactions, Agnesi, ZBL): the CUDA fast path equals the CPU reference path, float64, with and
// without CUDA graphs and in streamed chunks; float32 forces within 1e-4 of float64's, norm-wise.
TEST(GpuFastEngine, NonLinearModelEqualsCpuReference) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  const ModelFile file =
      ModelFile::load(std::string(FLASHMACE_SOURCE_DIR) + "/potentials/testing/tiny-mh1-random.safetensors");
  EngineOptions o;
  o.dtype = Dtype::Float64;
  set_engine_option(o, "path", "reference");
  const Structure s = make_cubic_lattice("fcc", 3.45, 3, {28, 29}, 0.15, 5);
  const Prediction pc = evaluate_structure(*make_evaluator(file, o), s);
  set_engine_option(o, "path", "fast");
  o.device = "cuda";
  for (const std::string plan : {"graph", "no graph", "streamed"}) {
    set_engine_option(o, "cuda_graph", plan == "graph" ? "on" : "off");
    o.edge_chunk = o.atom_chunk = plan == "streamed" ? 13 : 0;
    o.memory_bytes = plan == "streamed" ? 1 : 0;
    const auto gpu = make_evaluator(file, o);
    for (int step = 0; step < 2; ++step) {  // (the second replays the captured graph)
      const Prediction pg = evaluate_structure(*gpu, s);
      EXPECT_LE(std::abs(pg.energy - pc.energy) / std::abs(pc.energy), kEnergyRelTol) << plan;
      EXPECT_LE(testing::max_abs_diff(pg.forces, pc.forces), kAbsTol) << plan;
      const std::vector<double> wg(pg.virial.begin(), pg.virial.end()), wc(pc.virial.begin(), pc.virial.end());
      EXPECT_LE(testing::max_abs_diff(wg, wc), kAbsTol + 1e-14 * testing::max_abs_diff(wc, std::vector<double>(9, 0.0)))
          << plan;
    }
  }
  o = EngineOptions{};
  set_engine_option(o, "dtype", "float32");
  o.device = "cuda";
  const Prediction p32 = evaluate_structure(*make_evaluator(file, o), s);
  std::vector<double> diff(pc.forces.size());
  for (std::size_t i = 0; i < diff.size(); ++i) diff[i] = p32.forces[i] - pc.forces[i];
  EXPECT_LE(norm(diff), kFloat32ForceRelTol * norm(pc.forces));
}

}  // namespace
}  // namespace flashmace
