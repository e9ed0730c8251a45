// The reference path reproduces official MACE on the shared reference cases (float64): totals,
// per-atom energies, forces, stress, and every stored intermediate.
#include <gtest/gtest.h>

#include <cmath>

#include "core/model_file.h"
#include "model/reference_model_impl.h"
#include "test_support.h"

namespace flashmace {
namespace {

// Tolerances of the acceptance criteria: float64 round-off over a few thousand operations stays
// far below these; any convention error (a constant, a sign, an index) is orders of magnitude above.
constexpr double kEnergyRelTol = 1e-12;
constexpr double kAbsTol = 1e-10;

struct Case {
  std::string model;
  std::string structure;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.model << "/" << c.structure; }

class ReferenceCase : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceCase, MatchesOfficialMaceOutputs) {
  const Case c = GetParam();
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(c.model));
  const ModelFile file = ModelFile::load(testing::exported_model(c.model));
  const ReferenceModel model(file);
  const Structure s = testing::reference_structure(ref, c.structure);
  const Prediction p = model.evaluate(s, testing::reference_graph(ref, c.structure));

  const double e_ref = ref.to_doubles(c.structure + ".output.energy")[0];
  EXPECT_LE(std::abs(p.energy - e_ref) / std::abs(e_ref), kEnergyRelTol) << p.energy << " vs " << e_ref;
  EXPECT_LE(testing::max_abs_diff(p.node_energy, ref.to_doubles(c.structure + ".output.node_energy")), kAbsTol);
  EXPECT_LE(testing::max_abs_diff(p.forces, ref.to_doubles(c.structure + ".output.forces")), kAbsTol);
  if (s.periodic()) {
    const std::vector<double> stress(p.stress.begin(), p.stress.end());
    EXPECT_LE(testing::max_abs_diff(stress, ref.to_doubles(c.structure + ".output.stress")), kAbsTol);
  }
}

TEST_P(ReferenceCase, IntermediatesMatchOfficialMace) {
  const Case c = GetParam();
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(c.model));
  const ModelFile file = ModelFile::load(testing::exported_model(c.model));
  const ReferenceModel model(file);
  const Structure s = testing::reference_structure(ref, c.structure);
  const EdgeInputs in = make_edge_inputs(model.impl().params, s, testing::reference_graph(ref, c.structure));
  Trace trace;
  mace_interaction_energy(model.impl().params, in.graph, in.vectors, &trace);

  const std::string prefix = c.structure + ".intermediate.";
  int compared = 0;
  for (const std::string& key : ref.names()) {
    if (key.rfind(prefix, 0) != 0) continue;
    const std::string name = key.substr(prefix.size());
    if (ref.tensor(key).numel() == 0) {  // MACE returned None (no skip branch in a non-residual block)
      EXPECT_FALSE(trace.count(name)) << name << " should not exist";
      continue;
    }
    ASSERT_TRUE(trace.count(name)) << "the reference path does not produce intermediate " << name;
    const at::Tensor expected = testing::reference_tensor(ref, key);
    const at::Tensor got = trace.at(name).reshape(expected.sizes());
    EXPECT_LE((got - expected).abs().max().item<double>(), kAbsTol) << name;
    ++compared;
  }
  EXPECT_GE(compared, 8);
}

INSTANTIATE_TEST_SUITE_P(SharedReference, ReferenceCase,
                         ::testing::Values(Case{"small_l1", "bulk"}, Case{"small_l1", "cluster"},
                                           Case{"scalar_l0", "bulk"}, Case{"scalar_l0", "cluster"},
                                           Case{"large_l2", "bulk"}, Case{"large_l2", "cluster"}),
                         [](const auto& info) { return info.param.model + "_" + info.param.structure; });

}  // namespace
}  // namespace flashmace
