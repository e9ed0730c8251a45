// The fast engine's connectivity cache and bucket padding (engine/step/edge_topology.h): a topology is
// reused only for the same species, senders and receivers (a permuted edge list, another structure
// and the first one again each give the fresh engine's answer), and padding edges and atoms to the
// CUDA-graph bucket changes nothing (float64, also on a ghost-atom domain with per-atom virials and
// with several edge chunks). CPU; the graph replay itself is tested under `ctest -L gpu`.
#include <gtest/gtest.h>

#include <cmath>

#include "core/local_graph.h"
#include "core/model_file.h"
#include "engine/step/edge_topology.h"
#include "engine/host_evaluation.h"
#include "test_support.h"

namespace flashmace {
namespace {

constexpr double kEnergyRelTol = 1e-12;
constexpr double kAbsTol = 1e-10;

std::unique_ptr<Evaluator> fast(const std::string& model, bool pad, int64_t chunk = 0) {
  EngineOptions o;
  o.dtype = Dtype::Float64;
  o.pad_to_bucket = pad;
  o.edge_chunk = o.atom_chunk = chunk;
  return make_evaluator(ModelFile::load(testing::exported_model(model)), o);
}

void expect_same(const Prediction& got, const Prediction& want, const std::string& what) {
  testing::expect_same_prediction(got, want, kEnergyRelTol, kAbsTol, what);
}

TEST(EdgeTopology, ReusedOnlyForTheSameConnectivity) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file("small_l1"));
  const Structure bulk = testing::reference_structure(ref, "bulk"), cluster = testing::reference_structure(ref, "cluster");
  const Graph gb = testing::reference_graph(ref, "bulk"), gc = testing::reference_graph(ref, "cluster");
  const Graph gr = reversed_edges(gb);
  const Prediction want_b = evaluate_structure(*fast("small_l1", false), bulk, gb);
  const Prediction want_r = evaluate_structure(*fast("small_l1", false), bulk, gr);
  const Prediction want_c = evaluate_structure(*fast("small_l1", false), cluster, gc);
  // A stale edge order would pair every edge vector with another edge's senders and receivers.
  ASSERT_GT(testing::max_abs_diff(want_b.forces, std::vector<double>(want_b.forces.size(), 0.0)), 1e-3);
  const auto one = fast("small_l1", false);
  expect_same(evaluate_structure(*one, bulk, gb), want_b, "bulk");
  expect_same(evaluate_structure(*one, bulk, gb), want_b, "bulk again (reused)");
  expect_same(evaluate_structure(*one, bulk, gr), want_r, "reversed edges");
  expect_same(evaluate_structure(*one, cluster, gc), want_c, "cluster");
  expect_same(evaluate_structure(*one, bulk, gb), want_b, "bulk after the cluster");
}

TEST(EdgeTopology, PaddingToTheBucketChangesNothing) {
  for (const std::string model : {"small_l1", "scalar_l0", "large_l2"}) {
    const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(model));
    for (const std::string which : {"bulk", "cluster"}) {
      const Structure s = testing::reference_structure(ref, which);
      const Graph g = testing::reference_graph(ref, which);
      ASSERT_NE(padded_count(g.num_edges(), 1024), g.num_edges()) << "the case must need padding";
      for (const int64_t chunk : {int64_t{0}, int64_t{13}})
        expect_same(evaluate_structure(*fast(model, true, chunk), s, g),
                    evaluate_structure(*fast(model, false, chunk), s, g),
                    model + " " + which + " chunk " + std::to_string(chunk));
    }
    // A ghost-atom domain: padded atoms take part in the exchanges' row counts, never in the data.
    const Structure s = testing::reference_structure(ref, "bulk");
    std::vector<int> owner;
    const auto plain = fast(model, false), padded = fast(model, true);
    const LocalGraph lg = periodic_local_graph(s, plain->cutoff(), &owner);
    OwnerMapExchanger exchanger(lg.nlocal, owner);
    const LocalPrediction want = evaluate_local(*plain, lg, &exchanger, true);
    const LocalPrediction got = evaluate_local(*padded, lg, &exchanger, true);
    EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << model;
    EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol) << model;
    EXPECT_LE(testing::max_abs_diff(got.atom_virial, want.atom_virial), kAbsTol) << model;
  }
}

TEST(EdgeTopology, BucketsHoldTheCountWithLittlePadding) {
  int64_t previous = 0;
  for (int64_t n = 1; n < 3000000; n = n * 5 / 4 + 1) {
    const int64_t p = padded_count(n, 1024);
    EXPECT_GE(p, n);
    EXPECT_LE(p - n, std::max<int64_t>(1023, n / 16)) << n;
    EXPECT_GE(p, previous) << n;  // monotone: a larger graph never gets a smaller bucket
    previous = p;
  }
  EXPECT_EQ(padded_count(0, 1024), 0);
  // Counts a few percent apart (a neighbour-list rebuild) mostly share a bucket.
  EXPECT_EQ(padded_count(67392, 1024), padded_count(68000, 1024));
}

}  // namespace
}  // namespace flashmace
