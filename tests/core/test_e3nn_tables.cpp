// Our Wigner-3j symbols and spherical harmonics against e3nn's own tables
// (shared/reference/e3nn_tables.safetensors, e3nn 0.6.0) and the spot values of mace_spec.md 4 and 5.4.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <tuple>

#include "core/error.h"
#include "core/safetensors.h"
#include "core/wigner3j.h"
#include "model/spherical_harmonics.h"
#include "test_support.h"

namespace flashmace {
namespace {

// Both sides are float64 evaluations of the same closed forms, entries of size <= 1: a few ulps.
constexpr double kW3jTol = 1e-14;
constexpr double kShTol = 1e-13;  // entries up to ~3 (l = 4 polynomials): a few ulps of that
// The spec prints 15 decimals: its rounding (5e-16) plus a few ulps of the entries (<= 1 for w3j,
// <= 1.6 for the SH test vector).
constexpr double kSpecW3jTol = 1e-15;
constexpr double kSpecShTol = 2e-15;
constexpr int kTableLmax = 4;  // reference/README.md: w3j for all l <= 4

SafetensorsFile tables() { return SafetensorsFile::load(testing::reference_dir() + "/e3nn_tables.safetensors"); }

bool triangle(int l1, int l2, int l3) { return std::abs(l1 - l2) <= l3 && l3 <= l1 + l2; }
std::string w3j_key(int l1, int l2, int l3) {
  return "w3j." + std::to_string(l1) + "." + std::to_string(l2) + "." + std::to_string(l3);
}

TEST(Wigner3j, TableHoldsEveryTriangleTripleUpToL4) {
  const SafetensorsFile t = tables();
  int triples = 0;
  for (int l1 = 0; l1 <= kTableLmax; ++l1)
    for (int l2 = 0; l2 <= kTableLmax; ++l2)
      for (int l3 = 0; l3 <= kTableLmax; ++l3) {
        if (!triangle(l1, l2, l3)) continue;
        ++triples;
        ASSERT_TRUE(t.has(w3j_key(l1, l2, l3))) << w3j_key(l1, l2, l3);
        EXPECT_EQ(t.tensor(w3j_key(l1, l2, l3)).shape, (std::vector<int64_t>{2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1}));
      }
  EXPECT_EQ(triples, 65);
}

// Compares every tabulated triple whose l1+l2+l3 has the given parity; lists all that disagree.
void expect_table_agreement(int sum_parity) {
  const SafetensorsFile t = tables();
  std::string disagreeing;
  int compared = 0;
  for (int l1 = 0; l1 <= kTableLmax; ++l1)
    for (int l2 = 0; l2 <= kTableLmax; ++l2)
      for (int l3 = 0; l3 <= kTableLmax; ++l3) {
        if (!triangle(l1, l2, l3) || (l1 + l2 + l3) % 2 != sum_parity) continue;
        const double diff = testing::max_abs_diff(wigner_3j(l1, l2, l3), t.to_doubles(w3j_key(l1, l2, l3)));
        if (!(diff <= kW3jTol))
          disagreeing += " (" + std::to_string(l1) + "," + std::to_string(l2) + "," + std::to_string(l3) +
                         "): max diff " + std::to_string(diff) + ";";
        ++compared;
      }
  EXPECT_GT(compared, 0);
  EXPECT_EQ(disagreeing, "") << compared << " triples compared";
}

// The only triples MACE's natural-parity conv TP uses; e3nn 0.4.4 (MACE's pin) agrees with them too.
TEST(Wigner3j, ParityAllowedTriplesEqualE3nn) { expect_table_agreement(0); }

// e3nn >= 0.5 computes these from the same closed form (mace_spec.md 5.4; 0.4.4 flips some signs).
TEST(Wigner3j, OddSumTriplesEqualE3nn06) { expect_table_agreement(1); }

// mace_spec.md 5.4 lists every non-zero entry of C^{110}, C^{111}, C^{112}; all others are zero.
void expect_exactly(int l1, int l2, int l3, const std::map<std::tuple<int, int, int>, double>& nonzero) {
  const std::vector<double>& c = wigner_3j(l1, l2, l3);
  const int d2 = 2 * l2 + 1, d3 = 2 * l3 + 1;
  for (int a = 0; a < 2 * l1 + 1; ++a)
    for (int b = 0; b < d2; ++b)
      for (int m = 0; m < d3; ++m) {
        const auto it = nonzero.find({a, b, m});
        const double expected = it == nonzero.end() ? 0.0 : it->second;
        EXPECT_NEAR(c[(a * d2 + b) * d3 + m], expected, kSpecW3jTol)
            << "C^{" << l1 << l2 << l3 << "}[" << a << "," << b << "," << m << "]";
      }
}

TEST(Wigner3j, SpecSpotValues) {
  const double s3 = 0.577350269189626, s6 = 0.408248290463863;
  expect_exactly(1, 1, 0, {{{0, 0, 0}, s3}, {{1, 1, 0}, s3}, {{2, 2, 0}, s3}});
  expect_exactly(
      1, 1, 1,
      {{{0, 1, 2}, s6}, {{1, 2, 0}, s6}, {{2, 0, 1}, s6}, {{0, 2, 1}, -s6}, {{1, 0, 2}, -s6}, {{2, 1, 0}, -s6}});
  const double a = -0.182574185835055, b = -0.316227766016838, c = 0.365148371670111, d = 0.316227766016838;
  expect_exactly(1, 1, 2,
                 {{{0, 0, 2}, a},
                  {{2, 2, 2}, a},
                  {{0, 0, 4}, b},
                  {{1, 1, 2}, c},
                  {{0, 1, 1}, d},
                  {{0, 2, 0}, d},
                  {{1, 0, 1}, d},
                  {{1, 2, 3}, d},
                  {{2, 0, 0}, d},
                  {{2, 1, 3}, d},
                  {{2, 2, 4}, d}});
}

TEST(Wigner3j, TriangleViolationsThrow) {
  for (const auto& [l1, l2, l3] : {std::tuple{1, 1, 3}, std::tuple{0, 2, 1}, std::tuple{3, 0, 2}, std::tuple{-1, 0, 1}})
    EXPECT_THROW(wigner_3j(l1, l2, l3), Error) << l1 << "," << l2 << "," << l3;
}

TEST(SphericalHarmonics, EqualE3nnForEveryTabulatedOrder) {
  const SafetensorsFile t = tables();
  const at::Tensor v = testing::reference_tensor(t, "sh.vectors");
  int lmax = 0;
  while (t.has("sh.normalized_component.l" + std::to_string(lmax + 1))) ++lmax;
  ASSERT_EQ(lmax, kTableLmax);
  const at::Tensor y = spherical_harmonics(v, lmax);
  ASSERT_EQ(y.size(1), (lmax + 1) * (lmax + 1));
  int offset = 0;
  for (int l = 0; l <= lmax; ++l) {
    const at::Tensor expected = testing::reference_tensor(t, "sh.normalized_component.l" + std::to_string(l));
    EXPECT_LE((y.narrow(1, offset, 2 * l + 1) - expected).abs().max().item<double>(), kShTol) << "l=" << l;
    offset += 2 * l + 1;
  }
}

TEST(SphericalHarmonics, ComponentNormalisationSumsTo2lPlus1) {
  const at::Tensor v = testing::reference_tensor(tables(), "sh.vectors") * 3.7;  // input need not be unit length
  const at::Tensor y = spherical_harmonics(v, kTableLmax);
  int offset = 0;
  for (int l = 0; l <= kTableLmax; ++l) {
    const at::Tensor sum = y.narrow(1, offset, 2 * l + 1).pow(2).sum(1);
    EXPECT_LE((sum - (2 * l + 1)).abs().max().item<double>(), kShTol) << "l=" << l;
    offset += 2 * l + 1;
  }
}

TEST(SphericalHarmonics, SpecTestVector) {
  // mace_spec.md 4: v = (0.3, -0.5, 0.8), unnormalised, l = 0..3.
  const double expected[16] = {1.000000000000000, 0.524890659167824,  -0.874817765279706, 1.399708424447530,
                               0.948485717438551, -0.592803573399094, -0.262395732053547, -1.580809529064251,
                               1.086806551231673, 1.183647157770295,  -1.267467353894120, 0.135272824814658,
                               1.152223211306115, 0.360727532839089,  -1.452306343003679, 0.638177702550105};
  const at::Tensor v =
      at::tensor(std::vector<double>{0.3, -0.5, 0.8}, at::TensorOptions().dtype(at::kDouble)).reshape({1, 3});
  const at::Tensor y = spherical_harmonics(v, 3);
  ASSERT_EQ(y.size(1), 16);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(y[0][i].item<double>(), expected[i], kSpecShTol) << i;
}

}  // namespace
}  // namespace flashmace
