// Our Wigner-3j symbols and spherical harmonics against e3nn's own tables
// (shared/reference/e3nn_tables.safetensors, e3nn 0.6.0) and the spec's spot values.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/safetensors.h"
#include "core/wigner3j.h"
#include "model/spherical_harmonics.h"
#include "test_support.h"

namespace flashmace {
namespace {

// Both sides are float64 evaluations of the same closed forms: agreement to a few ulps.
constexpr double kW3jTol = 1e-14;
constexpr double kShTol = 1e-13;

SafetensorsFile tables() { return SafetensorsFile::load(testing::reference_dir() + "/e3nn_tables.safetensors"); }

TEST(Wigner3j, EqualsE3nnForEveryTabulatedTriple) {
  const SafetensorsFile t = tables();
  int compared = 0;
  for (const auto& name : t.names()) {
    if (name.rfind("w3j.", 0) != 0) continue;
    int l1, l2, l3;
    ASSERT_EQ(std::sscanf(name.c_str(), "w3j.%d.%d.%d", &l1, &l2, &l3), 3);
    const std::vector<double> expected = t.to_doubles(name);
    const std::vector<double>& got = wigner_3j(l1, l2, l3);
    EXPECT_LE(testing::max_abs_diff(got, expected), kW3jTol) << name;
    ++compared;
  }
  EXPECT_GT(compared, 50);
}

TEST(Wigner3j, SpecSpotValuesAndTriangleRule) {
  const auto& c110 = wigner_3j(1, 1, 0);
  EXPECT_NEAR(c110[0], 0.577350269189626, 1e-15);
  const auto& c111 = wigner_3j(1, 1, 1);  // [m1][m2][m3] row-major, 3x3x3
  EXPECT_NEAR(c111[0 * 9 + 1 * 3 + 2], 0.408248290463863, 1e-15);
  EXPECT_NEAR(c111[0 * 9 + 2 * 3 + 1], -0.408248290463863, 1e-15);
  const auto& c112 = wigner_3j(1, 1, 2);  // 3x3x5
  EXPECT_NEAR(c112[0 * 15 + 0 * 5 + 4], -0.316227766016838, 1e-15);
  EXPECT_NEAR(c112[1 * 15 + 1 * 5 + 2], 0.365148371670111, 1e-15);
  EXPECT_THROW(wigner_3j(1, 1, 3), Error);
}

TEST(SphericalHarmonics, EqualE3nnUpToTheTabulatedOrder) {
  const SafetensorsFile t = tables();
  const at::Tensor v = testing::reference_tensor(t, "sh.vectors");
  int lmax = 0;
  while (t.has("sh.normalized_component.l" + std::to_string(lmax + 1))) ++lmax;
  ASSERT_GE(lmax, 4);
  const at::Tensor y = spherical_harmonics(v, lmax);
  int offset = 0;
  for (int l = 0; l <= lmax; ++l) {
    const at::Tensor expected = testing::reference_tensor(t, "sh.normalized_component.l" + std::to_string(l));
    EXPECT_LE((y.narrow(1, offset, 2 * l + 1) - expected).abs().max().item<double>(), kShTol) << "l=" << l;
    // component normalisation: sum_m Y_lm^2 = 2l+1 on the unit sphere
    EXPECT_LE((y.narrow(1, offset, 2 * l + 1).pow(2).sum(1) - (2 * l + 1)).abs().max().item<double>(), 1e-12);
    offset += 2 * l + 1;
  }
}

TEST(SphericalHarmonics, SpecTestVector) {
  const double expected[16] = {1.000000000000000, 0.524890659167824,  -0.874817765279706, 1.399708424447530,
                               0.948485717438551, -0.592803573399094, -0.262395732053547, -1.580809529064251,
                               1.086806551231673, 1.183647157770295,  -1.267467353894120, 0.135272824814658,
                               1.152223211306115, 0.360727532839089,  -1.452306343003679, 0.638177702550105};
  const at::Tensor v =
      at::tensor(std::vector<double>{0.3, -0.5, 0.8}, at::TensorOptions().dtype(at::kDouble)).reshape({1, 3});
  const at::Tensor y = spherical_harmonics(v, 3);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(y[0][i].item<double>(), expected[i], 1e-14) << i;
}

}  // namespace
}  // namespace flashmace
