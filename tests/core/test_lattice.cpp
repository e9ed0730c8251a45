// The benchmark lattices (core/lattice.h): atom counts, composition and nearest-neighbour shells of
// the random alloys and the ordered compounds (rock salt, cubic perovskite), checked on unperturbed
// lattices by distances under the minimum image, and the messages for wrong element lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/lattice.h"
#include "test_support.h"

namespace flashmace {
namespace {

// The shortest minimum-image distance from atom i to any atom of element z (cubic box of side L).
double nearest(const Structure& s, int i, int z) {
  const double L = s.cell[0];
  double best = 1e300;
  for (int j = 0; j < s.size(); ++j) {
    if (j == i || s.atomic_numbers[j] != z) continue;
    double r2 = 0;
    for (int d = 0; d < 3; ++d) {
      double dx = s.positions[3 * j + d] - s.positions[3 * i + d];
      dx -= L * std::round(dx / L);
      r2 += dx * dx;
    }
    best = std::min(best, std::sqrt(r2));
  }
  return best;
}

std::map<int, int> composition(const Structure& s) {
  std::map<int, int> count;
  for (int z : s.atomic_numbers) ++count[z];
  return count;
}

TEST(Lattice, RockSaltAlternatesItsTwoElements) {
  const double a = 4.21;
  const Structure s = make_cubic_lattice("rocksalt", a, 3, {12, 8}, 0.0, 1);  // MgO
  ASSERT_EQ(s.size(), 8 * 27);
  EXPECT_EQ(composition(s), (std::map<int, int>{{8, 108}, {12, 108}}));
  for (int i = 0; i < s.size(); ++i) {
    const int z = s.atomic_numbers[i], other = z == 12 ? 8 : 12;
    EXPECT_NEAR(nearest(s, i, other), a / 2, 1e-12) << i;       // unlike neighbours at a/2
    EXPECT_NEAR(nearest(s, i, z), a / std::sqrt(2.0), 1e-12) << i;  // like ones at a/sqrt(2)
  }
}

TEST(Lattice, PerovskiteHasTheAbx3Shells) {
  const double a = 3.905;
  const Structure s = make_cubic_lattice("perovskite", a, 2, {38, 22, 8}, 0.0, 1);  // SrTiO3
  ASSERT_EQ(s.size(), 5 * 8);
  EXPECT_EQ(composition(s), (std::map<int, int>{{8, 24}, {22, 8}, {38, 8}}));
  for (int i = 0; i < s.size(); ++i) {
    const int z = s.atomic_numbers[i];
    if (z == 22) EXPECT_NEAR(nearest(s, i, 8), a / 2, 1e-12);                    // TiO6 octahedra
    if (z == 38) EXPECT_NEAR(nearest(s, i, 8), a / std::sqrt(2.0), 1e-12);       // SrO12 cages
    if (z == 38) EXPECT_NEAR(nearest(s, i, 22), a * std::sqrt(3.0) / 2, 1e-12);  // Sr-Ti along the body diagonal
  }
}

TEST(Lattice, AlloysDrawEveryElementAndKeepTheirCounts) {
  const Structure s = make_cubic_lattice("fcc", 3.6, 6, {28, 29, 26}, 0.05, 7);
  ASSERT_EQ(s.size(), 864);
  const std::map<int, int> count = composition(s);
  ASSERT_EQ(count.size(), 3u);
  for (const auto& [z, n] : count) EXPECT_GT(n, 864 / 3 - 80) << z;  // random, about a third each
  EXPECT_EQ(atoms_per_cell("bcc"), 2);
}

TEST(Lattice, WrongElementListsAreExplained) {
  EXPECT_NE(testing::error_of([] { make_cubic_lattice("rocksalt", 4.2, 2, {12}, 0, 1); })
                .find("Lattice rocksalt needs 2 elements (cation and anion, e.g. Mg,O), got 1"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { make_cubic_lattice("perovskite", 3.9, 2, {38, 22}, 0, 1); })
                .find("Lattice perovskite needs 3 elements (A, B and X of ABX3, e.g. Sr,Ti,O), got 2"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { atoms_per_cell("hcp"); }).find("use fcc, bcc, rocksalt or perovskite"),
            std::string::npos);
}

}  // namespace
}  // namespace flashmace
