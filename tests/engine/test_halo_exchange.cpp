// The per-layer halo exchange (DESIGN.md idea 4) without LAMMPS or MPI: a periodic structure as one
// domain whose ghosts are periodic images, refreshed by the in-process exchanger, must reproduce
// the periodic evaluation exactly; switching the exchange off must not.
#include <gtest/gtest.h>

#include <cmath>

#include "core/local_graph.h"
#include "core/model_file.h"
#include "model/reference_model.h"
#include "test_support.h"

namespace flashmace {
namespace {

// Same edges, same arithmetic, different summation order: float64 round-off only.
constexpr double kTol = 1e-10;

class HaloCase : public ::testing::TestWithParam<std::string> {};

std::vector<double> fold_ghosts(const std::vector<double>& rows, int width, int nlocal, const std::vector<int>& owner) {
  std::vector<double> out(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(nlocal) * width);
  for (std::size_t g = 0; g < owner.size(); ++g)
    for (int k = 0; k < width; ++k) out[owner[g] * width + k] += rows[(nlocal + g) * width + k];
  return out;
}

TEST_P(HaloCase, GhostGraphWithExchangeEqualsPeriodicEvaluation) {
  const ReferenceModel model(ModelFile::load(testing::exported_model(GetParam())));
  const Structure s = testing::reference_structure(SafetensorsFile::load(testing::reference_file(GetParam())), "bulk");
  const Prediction periodic = model.evaluate(s);

  std::vector<int> owner;
  const LocalGraph lg = periodic_local_graph(s, model.cutoff(), &owner);
  ASSERT_GT(lg.nghost, 0);
  OwnerMapExchanger exchanger(lg.nlocal, owner);
  const LocalPrediction local = model.evaluate_local(lg, &exchanger, /*atom_virial=*/true);

  EXPECT_NEAR(local.energy, periodic.energy, kTol * std::abs(periodic.energy));
  EXPECT_LE(testing::max_abs_diff(local.node_energy, periodic.node_energy), kTol);
  EXPECT_LE(testing::max_abs_diff(fold_ghosts(local.forces, 3, lg.nlocal, owner), periodic.forces), kTol);
  const std::vector<double> wl(local.virial.begin(), local.virial.end()),
      wp(periodic.virial.begin(), periodic.virial.end());
  EXPECT_LE(testing::max_abs_diff(wl, wp), kTol);

  // Per-atom virials add up to the global virial (Voigt xx yy zz xy xz yz).
  std::array<double, 6> sum{};
  for (int i = 0; i < lg.ntotal(); ++i)
    for (int k = 0; k < 6; ++k) sum[k] += local.atom_virial[6 * i + k];
  const int voigt[6] = {0, 4, 8, 1, 2, 5};
  for (int k = 0; k < 6; ++k) EXPECT_NEAR(sum[k], periodic.virial[voigt[k]], kTol) << k;
}

TEST_P(HaloCase, WithoutExchangeTheResultIsWrong) {
  // Negative control: proves the test above can fail when ghost features are stale.
  const ReferenceModel model(ModelFile::load(testing::exported_model(GetParam())));
  const Structure s = testing::reference_structure(SafetensorsFile::load(testing::reference_file(GetParam())), "bulk");
  const Prediction periodic = model.evaluate(s);
  std::vector<int> owner;
  const LocalGraph lg = periodic_local_graph(s, model.cutoff(), &owner);
  const LocalPrediction stale = model.evaluate_local(lg, nullptr);
  EXPECT_GT(std::abs(stale.energy - periodic.energy), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(SharedReference, HaloCase, ::testing::Values("small_l1", "scalar_l0", "large_l2"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace flashmace
