// Neighbour lists and structure input: our list reproduces MACE's (matscipy) edge sets exactly,
// periodic self-images are handled as MACE does, and bad structures are rejected by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"
#include "core/model_file.h"
#include "core/structure.h"
#include "core/xyz.h"
#include "test_support.h"

namespace flashmace {
namespace {

using Edge = std::array<int64_t, 5>;  // sender, receiver, shift a, b, c

std::vector<Edge> edge_set(const Graph& g) {
  std::vector<Edge> edges;
  for (int e = 0; e < g.num_edges(); ++e)
    edges.push_back(
        {g.sender[e], g.receiver[e], g.unit_shifts[3 * e], g.unit_shifts[3 * e + 1], g.unit_shifts[3 * e + 2]});
  std::sort(edges.begin(), edges.end());
  return edges;
}

class NeighborCase : public ::testing::TestWithParam<std::string> {};

TEST_P(NeighborCase, EdgeSetEqualsMacesNeighbourList) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  const double r_max = ModelFile::load(testing::exported_model(GetParam())).config().r_max;
  for (const char* which : {"bulk", "cluster"}) {
    const Structure s = testing::reference_structure(ref, which);
    const std::vector<Edge> ours = edge_set(build_neighbor_list(s, r_max));
    const std::vector<Edge> mace = edge_set(testing::reference_graph(ref, which));
    EXPECT_EQ(ours.size(), mace.size()) << which;
    EXPECT_TRUE(ours == mace) << which;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedReference, NeighborCase, ::testing::Values("small_l1", "scalar_l0", "large_l2"),
                         [](const auto& info) { return info.param; });

TEST(NeighborList, SingleAtomCellKeepsItsPeriodicImages) {
  // Simple cubic, a = 2: images at distance 2 (6), 2*sqrt2 (12), 2*sqrt3 (8); cutoff 3 keeps 18.
  Structure s;
  s.atomic_numbers = {29};
  s.positions = {0.3, 0.2, 0.1};
  s.cell = {2, 0, 0, 0, 2, 0, 0, 0, 2};
  s.pbc = {true, true, true};
  const Graph g = build_neighbor_list(s, 3.0);
  EXPECT_EQ(g.num_edges(), 18);
  for (int e = 0; e < g.num_edges(); ++e) {
    EXPECT_EQ(g.sender[e], 0);
    EXPECT_FALSE(g.unit_shifts[3 * e] == 0 && g.unit_shifts[3 * e + 1] == 0 && g.unit_shifts[3 * e + 2] == 0);
  }
}

TEST(NeighborList, UnwrappedPositionsGiveTheSameEdges) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file("small_l1"));
  Structure s = testing::reference_structure(ref, "bulk");
  const std::size_t before = build_neighbor_list(s, 5.0).sender.size();
  // Move atom 3 by whole lattice vectors (+2a, -1b, +3c): physically the same structure.
  for (int d = 0; d < 3; ++d) s.positions[9 + d] += 2 * s.cell[d] - s.cell[3 + d] + 3 * s.cell[6 + d];
  EXPECT_EQ(build_neighbor_list(s, 5.0).sender.size(), before);
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(NeighborList, BadStructuresAreRejectedByName) {
  Structure s;
  EXPECT_NE(error_of([&] { build_neighbor_list(s, 3.0); }).find("Empty structure"), std::string::npos);
  s.atomic_numbers = {1, 1, 1};
  s.positions = {0, 0, 0, 1, 0, 0, 1, 0, 0};
  const std::string overlap = error_of([&] { build_neighbor_list(s, 3.0); });
  EXPECT_NE(overlap.find("Atoms 1 and 2"), std::string::npos) << overlap;
  s.positions[4] = std::nan("");
  EXPECT_NE(error_of([&] { build_neighbor_list(s, 3.0); }).find("Atom 1 has a non-finite coordinate"),
            std::string::npos);
}

TEST(ExtendedXyz, ReadsLatticePbcAndPropertyColumns) {
  const Structure s = parse_extxyz(
      "2\n"
      "Lattice=\"4 0 0 0 5 0 0.5 0 6\" Properties=id:I:1:species:S:1:pos:R:3:forces:R:3 pbc=\"T T F\" energy=-1.5\n"
      "7 Cu 0.0 0.5 1.0 0 0 0\n"
      "8 Ni 1.5 2.0 2.5 0 0 0\n",
      "memory.xyz");
  EXPECT_EQ(s.atomic_numbers, (std::vector<int>{29, 28}));
  EXPECT_EQ(s.positions, (std::vector<double>{0.0, 0.5, 1.0, 1.5, 2.0, 2.5}));
  EXPECT_EQ(s.cell[6], 0.5);
  EXPECT_EQ(s.cell[8], 6.0);
  EXPECT_TRUE(s.pbc[0] && s.pbc[1] && !s.pbc[2]);
}

TEST(ExtendedXyz, ErrorsNameTheLine) {
  EXPECT_NE(error_of([] {
              parse_extxyz("1\nProperties=species:S:1:pos:R:3\nXx 0 0 0\n", "bad.xyz");
            }).find("bad.xyz: line 3: unknown element 'Xx'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_extxyz("3\n\nH 0 0 0\n", "short.xyz"); }).find("expected 3 atom lines, found 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_extxyz("two\n", "count.xyz"); }).find("line 1 must hold the number of atoms"),
            std::string::npos);
}

}  // namespace
}  // namespace flashmace
