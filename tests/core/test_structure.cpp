// Neighbour lists and structure input: our list reproduces MACE's (matscipy) edge sets exactly and
// a brute-force image search on skewed and partly periodic cells, periodic self-images are kept as
// MACE keeps them (mace_spec.md 2.4), and bad structures and XYZ files are rejected by name.
// Edge sets are compared exactly: they are integer tuples.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "core/model_file.h"
#include "core/structure.h"
#include "core/xyz.h"
#include "test_support.h"

namespace flashmace {
namespace {

using Edge = std::array<int64_t, 5>;  // sender, receiver, unit shift a, b, c

std::vector<Edge> edge_set(const Graph& g) {
  std::vector<Edge> edges;
  for (int e = 0; e < g.num_edges(); ++e)
    edges.push_back(
        {g.sender[e], g.receiver[e], g.unit_shifts[3 * e], g.unit_shifts[3 * e + 1], g.unit_shifts[3 * e + 2]});
  std::sort(edges.begin(), edges.end());
  return edges;
}

// Every atom pair and every image shift with |component| <= k in the periodic directions, no
// binning. The image position is formed in the same order as in the library, so that a distance
// at the cutoff rounds the same way on both sides.
std::vector<Edge> brute_force_edges(const Structure& s, double cutoff, int k) {
  std::array<int, 3> kmax{};
  for (int d = 0; d < 3; ++d) kmax[d] = s.pbc[d] ? k : 0;
  const std::vector<double>& x = s.positions;
  const auto& h = s.cell;
  std::vector<Edge> edges;
  for (int i = 0; i < s.size(); ++i)
    for (int j = 0; j < s.size(); ++j)
      for (int a = -kmax[0]; a <= kmax[0]; ++a)
        for (int b = -kmax[1]; b <= kmax[1]; ++b)
          for (int c = -kmax[2]; c <= kmax[2]; ++c) {
            if (i == j && a == 0 && b == 0 && c == 0) continue;
            double r2 = 0;
            for (int d = 0; d < 3; ++d) {
              const double image = x[3 * j + d] + a * h[d] + b * h[3 + d] + c * h[6 + d];
              r2 += (image - x[3 * i + d]) * (image - x[3 * i + d]);
            }
            if (r2 < cutoff * cutoff) edges.push_back({i, j, a, b, c});
          }
  std::sort(edges.begin(), edges.end());
  return edges;
}

class NeighborCase : public ::testing::TestWithParam<std::string> {};

TEST_P(NeighborCase, EdgeSetEqualsMacesNeighbourList) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  const double r_max = ModelFile::load(testing::exported_model(GetParam())).config().r_max;
  for (const char* which : {"bulk", "cluster"}) {
    SCOPED_TRACE(which);
    const Structure s = testing::reference_structure(ref, which);
    const Graph ours = build_neighbor_list(s, r_max);
    EXPECT_EQ(ours.num_nodes, s.size());
    const std::vector<Edge> mace = edge_set(testing::reference_graph(ref, which));
    ASSERT_FALSE(mace.empty());
    EXPECT_EQ(ours.num_edges(), static_cast<int>(mace.size()));
    EXPECT_TRUE(edge_set(ours) == mace);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedReference, NeighborCase, ::testing::Values("small_l1", "scalar_l0", "large_l2"),
                         [](const auto& info) { return info.param; });

// A strongly sheared cell (plane spacing 1.7 A along a, much less than the 3 A vector length) with
// atoms outside the cell: image counts must come from plane spacings and the atoms' spread.
Structure skewed_cell() {
  Structure s;
  s.atomic_numbers = {14, 14, 8, 8, 1};
  s.positions = {0.1, 0.2, 0.3, 1.5, 1.1, 0.9, 2.8, 2.5, 2.7, -2.0, 3.5, 1.0, 4.0, -1.0, 5.5};
  s.cell = {3.0, 0.0, 0.0, 2.6, 2.9, 0.0, -2.2, 1.3, 3.1};
  s.pbc = {true, true, true};
  return s;
}

constexpr int kBruteForceImages = 12;  // the 4 A cutoff needs shifts up to 7 in skewed_cell()

void expect_equals_brute_force(const Structure& s, double cutoff) {
  const std::vector<Edge> expected = brute_force_edges(s, cutoff, kBruteForceImages);
  ASSERT_FALSE(expected.empty());
  for (const Edge& e : expected)
    for (int d = 2; d < 5; ++d) ASSERT_LT(std::abs(e[d]), kBruteForceImages) << "brute-force range too small";
  EXPECT_TRUE(edge_set(build_neighbor_list(s, cutoff)) == expected) << expected.size() << " edges expected";
}

TEST(NeighborList, SkewedCellWithUnwrappedAtomsEqualsBruteForce) {
  for (double cutoff : {1.5, 2.5, 4.0}) {
    SCOPED_TRACE(cutoff);
    expect_equals_brute_force(skewed_cell(), cutoff);
  }
}

TEST(NeighborList, SlabHasNoImagesAcrossItsOpenDirection) {
  Structure s = skewed_cell();
  s.pbc = {true, true, false};
  expect_equals_brute_force(s, 4.0);
  const Graph g = build_neighbor_list(s, 4.0);
  for (int e = 0; e < g.num_edges(); ++e) EXPECT_EQ(g.unit_shifts[3 * e + 2], 0) << e;
}

TEST(NeighborList, SingleAtomCellKeepsItsPeriodicImages) {
  // Simple cubic, a = 2: image shells at 2 (6 images), 2*sqrt2 = 2.83 (12), 2*sqrt3 = 3.46 (8),
  // 4 (6); the cutoffs below lie between shells.
  Structure s;
  s.atomic_numbers = {29};
  s.positions = {0.3, 0.2, 0.1};
  s.cell = {2, 0, 0, 0, 2, 0, 0, 0, 2};
  s.pbc = {true, true, true};
  for (const auto& [cutoff, images] : {std::pair{1.9, 0}, {2.5, 6}, {3.0, 18}, {3.7, 26}, {4.2, 32}}) {
    SCOPED_TRACE(cutoff);
    const std::vector<Edge> edges = edge_set(build_neighbor_list(s, cutoff));
    ASSERT_EQ(static_cast<int>(edges.size()), images);
    for (const Edge& e : edges) {
      EXPECT_EQ(e[0], 0);
      EXPECT_EQ(e[1], 0);
      EXPECT_FALSE(e[2] == 0 && e[3] == 0 && e[4] == 0);  // the zero-shift self pair is excluded
      // Full list: the opposite image is there too.
      EXPECT_TRUE(std::binary_search(edges.begin(), edges.end(), Edge{0, 0, -e[2], -e[3], -e[4]}));
    }
  }
}

// A perturbed fcc crystal whose cell list is a dense table of bins: the list equals the brute-force
// search, and comes sender by sender (the order that parallel passes over the atoms keep).
TEST(NeighborList, PerturbedCrystalEqualsBruteForceSenderBySender) {
  Structure s;
  const double a = 3.61;
  const int n = 3;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k)
        for (const auto& b : {std::array<double, 3>{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}}) {
          const int atom = s.size();
          s.atomic_numbers.push_back(29);
          for (int d = 0; d < 3; ++d)
            s.positions.push_back(a * ((d == 0 ? i : d == 1 ? j : k) + b[d]) + 0.07 * std::sin(1.7 * atom + d));
        }
  s.cell = {n * a, 0, 0, 0, n * a, 0, 0, 0, n * a};
  s.pbc = {true, true, true};
  const Graph g = build_neighbor_list(s, 6.0);
  EXPECT_TRUE(std::is_sorted(g.sender.begin(), g.sender.end()));
  EXPECT_TRUE(edge_set(g) == brute_force_edges(s, 6.0, 3));
}

// Atoms 100 million km apart: far more bins than atoms (the cell list keeps only the occupied ones)
// and more than a bin index could count at the cutoff's width.
TEST(NeighborList, AtomsFarApartPairOnlyWithTheirNeighbours) {
  Structure s;
  s.atomic_numbers = {1, 1, 8, 1};
  s.positions = {0, 0, 0, 0.9, 0, 0, 1e12, 1e12, 5, 1e12, 1e12 + 1.1, 5};
  const std::vector<Edge> expected = brute_force_edges(s, 2.0, 0);
  EXPECT_EQ(expected, (std::vector<Edge>{{0, 1, 0, 0, 0}, {1, 0, 0, 0, 0}, {2, 3, 0, 0, 0}, {3, 2, 0, 0, 0}}));
  EXPECT_TRUE(edge_set(build_neighbor_list(s, 2.0)) == expected);
}

TEST(NeighborList, AtomsMovedByLatticeVectorsGiveTheSameEdges) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file("small_l1"));
  const double r_max = ModelFile::load(testing::exported_model("small_l1")).config().r_max;
  Structure s = testing::reference_structure(ref, "bulk");
  const std::vector<Edge> wrapped = edge_set(build_neighbor_list(s, r_max));
  // Move atom 3 by the lattice vector L = 2a - b + 3c: the same crystal. An edge into atom 3 now
  // needs shift S - L, an edge out of it S + L; its self-images keep their shifts.
  const int moved = 3;
  const std::array<int64_t, 3> L{2, -1, 3};
  for (int d = 0; d < 3; ++d)
    s.positions[3 * moved + d] += L[0] * s.cell[d] + L[1] * s.cell[3 + d] + L[2] * s.cell[6 + d];
  std::vector<Edge> expected;
  for (Edge e : wrapped) {
    const int sign = (e[1] == moved) - (e[0] == moved);
    for (int d = 0; d < 3; ++d) e[2 + d] -= sign * L[d];
    expected.push_back(e);
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_TRUE(edge_set(build_neighbor_list(s, r_max)) == expected);
}

Structure two_atoms() {
  Structure s;
  s.atomic_numbers = {1, 1};
  s.positions = {0, 0, 0, 1, 0, 0};
  return s;
}

TEST(CheckStructure, AcceptsTheReferenceStructures) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file("small_l1"));
  for (const char* which : {"bulk", "cluster"})
    EXPECT_NO_THROW(check_structure(testing::reference_structure(ref, which)));
  EXPECT_NO_THROW(check_structure(two_atoms()));  // non-periodic: the (zero) cell is not used
}

TEST(CheckStructure, RejectsUnusableInputByName) {
  EXPECT_EQ(testing::error_of([] { check_structure(Structure{}); }), "Empty structure: there are no atoms to evaluate");

  Structure s = two_atoms();
  s.positions.pop_back();
  EXPECT_EQ(testing::error_of([&] { check_structure(s); }), "Structure has 5 coordinates for 2 atoms");

  s = two_atoms();
  s.positions[4] = std::nan("");
  EXPECT_EQ(testing::error_of([&] { check_structure(s); }), "Atom 1 has a non-finite coordinate (NaN or inf)");
  s.positions[4] = -INFINITY;
  EXPECT_EQ(testing::error_of([&] { check_structure(s); }), "Atom 1 has a non-finite coordinate (NaN or inf)");

  s = two_atoms();
  s.pbc = {true, true, true};
  s.cell = {3, 0, 0, 0, 3, 0, 0, 0, 3};
  s.cell[4] = INFINITY;
  EXPECT_EQ(testing::error_of([&] { check_structure(s); }), "Cell vector 1 is not finite");
  s.cell = {3, 0, 0, 0, 3, 0, 6, 0, 0};  // c parallel to a
  EXPECT_NE(testing::error_of([&] { check_structure(s); }).find("Periodic structure with a degenerate cell"),
            std::string::npos);
}

TEST(NeighborList, RejectsBadStructuresByName) {
  EXPECT_EQ(testing::error_of([] { build_neighbor_list(Structure{}, 3.0); }),
            "Empty structure: there are no atoms to evaluate");

  Structure s;
  s.atomic_numbers = {1, 1, 1};
  s.positions = {0, 0, 0, 1, 0, 0, 1, 0, 0};  // atoms 1 and 2 coincide
  const std::string overlap = testing::error_of([&] { build_neighbor_list(s, 3.0); });
  EXPECT_EQ(overlap.rfind("Atoms 1 and 2 are 0.000000 A apart, closer than 0.100000 A: overlapping atoms", 0), 0u)
      << overlap;

  s.positions[4] = std::nan("");
  EXPECT_EQ(testing::error_of([&] { build_neighbor_list(s, 3.0); }), "Atom 1 has a non-finite coordinate (NaN or inf)");

  // A cell much smaller than an atom puts each atom on top of its own images.
  Structure tiny;
  tiny.atomic_numbers = {1};
  tiny.positions = {0, 0, 0};
  tiny.cell = {0.05, 0, 0, 0, 3, 0, 0, 0, 3};
  tiny.pbc = {true, true, true};
  EXPECT_NE(testing::error_of([&] {
              build_neighbor_list(tiny, 2.0);
            }).find("Atoms 0 and 0 (a periodic image) are 0.050000 A"),
            std::string::npos);
}

TEST(ExtendedXyz, ReadsLatticePbcAndPropertyColumns) {
  // Extra columns before species, between species and pos, and after pos.
  const Structure s = parse_extxyz(
      "2\n"
      "Lattice=\"4 0 0 0 5 0 0.5 0 6\" Properties=id:I:1:species:S:1:charge:R:1:pos:R:3:forces:R:3 "
      "pbc=\"T T F\" energy=-1.5\n"
      "7 Cu 0.25 0.0 0.5 1.0 9 9 9\n"
      "8 Ni -0.25 1.5 2.0 2.5 9 9 9\n",
      "memory.xyz");
  EXPECT_EQ(s.atomic_numbers, (std::vector<int>{29, 28}));
  EXPECT_EQ(s.positions, (std::vector<double>{0.0, 0.5, 1.0, 1.5, 2.0, 2.5}));
  EXPECT_EQ(s.cell, (std::array<double, 9>{4, 0, 0, 0, 5, 0, 0.5, 0, 6}));
  EXPECT_EQ(s.pbc, (std::array<bool, 3>{true, true, false}));
}

TEST(ExtendedXyz, LatticeWithoutPbcIsPeriodicAndPlainXyzIsNot) {
  const Structure periodic = parse_extxyz("1\nLattice=\"3 0 0 0 3 0 0 0 3\"\nH 1 2 3\n", "periodic.xyz");
  EXPECT_EQ(periodic.pbc, (std::array<bool, 3>{true, true, true}));
  const Structure plain = parse_extxyz("2\nwater fragment\nO 0 0 0.1\nH 0.9 0 0\n", "plain.xyz");
  EXPECT_EQ(plain.atomic_numbers, (std::vector<int>{8, 1}));
  EXPECT_EQ(plain.positions, (std::vector<double>{0, 0, 0.1, 0.9, 0, 0}));
  EXPECT_FALSE(plain.periodic());
}

TEST(ExtendedXyz, ReadsAFileAndNamesAMissingOne) {
  const std::string path = ::testing::TempDir() + "/one_atom.xyz";
  std::ofstream(path) << "1\nProperties=species:S:1:pos:R:3\nSi 1 2 3\n";
  EXPECT_EQ(read_extxyz(path).atomic_numbers, (std::vector<int>{14}));
  const std::string missing = ::testing::TempDir() + "/missing.xyz";
  EXPECT_EQ(testing::error_of([&] { read_extxyz(missing); }), "Cannot open XYZ file " + missing);
}

TEST(ExtendedXyz, ErrorsNameTheFileAndLine) {
  const std::string props = "Properties=species:S:1:pos:R:3";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "XYZ file bad.xyz: empty file"},
      {"two\n", "XYZ file bad.xyz: line 1 must hold the number of atoms, got 'two'"},
      {"-1\n\n", "XYZ file bad.xyz: negative atom count"},
      {"1\n" + props + "\nXx 0 0 0\n", "XYZ file bad.xyz: line 3: unknown element 'Xx'"},
      {"3\n" + props + "\nH 0 0 0\n", "XYZ file bad.xyz: expected 3 atom lines, found 1"},
      {"1\n" + props + "\nH 0 0\n", "XYZ file bad.xyz: line 3 has 3 columns, expected 4"},
      {"1\n" + props + "\nH 0 zero 0\n", "XYZ file bad.xyz: line 3: cannot read coordinate 'zero'"},
      {"1\npbc=\"T T T\"\nH 0 0 0\n", "XYZ file bad.xyz: pbc is set but there is no Lattice"},
      {"1\nLattice=\"1 0 0 0 1 0 0 0\"\nH 0 0 0\n", "XYZ file bad.xyz: Lattice needs 9 numbers"},
      {"1\nLattice=\"1 0 0 0 1 0 0 0 1\" pbc=\"T T\"\nH 0 0 0\n", "XYZ file bad.xyz: pbc needs 3 values"},
      {"1\nProperties=species:S:1:pos:R\nH 0 0 0\n", "XYZ file bad.xyz: Properties must be name:type:count triples"},
      {"1\nProperties=species:S:1:xyz:R:3\nH 0 0 0\n", "XYZ file bad.xyz: Properties must include species and pos"},
      // (two counts near INT_MAX: their sum must be refused, not overflow)
      {"1\nProperties=species:S:1:pos:R:3:a:R:2000000000:b:R:2000000000\nH 0 0 0\n",
       "XYZ file bad.xyz: Properties lists more than 1048576 columns (entry 'a' with 2000000000)"},
  };
  for (const auto& [text, message] : cases) {
    const std::string got = testing::error_of([&] { parse_extxyz(text, "bad.xyz"); });
    EXPECT_EQ(got.rfind(message, 0), 0u) << "input:\n" << text << "\nmessage: " << got;
  }
}

// The reader's contract is flashmace::Error naming the file (xyz.h), whatever the damage.
TEST(ExtendedXyz, NonNumericPropertyCountIsAnError) {
  EXPECT_THROW(parse_extxyz("1\nProperties=species:S:one:pos:R:3\nH 0 0 0\n", "bad.xyz"), Error);
}

// pos:R:2 would read the next property's column as z.
TEST(ExtendedXyz, PositionsMustHaveThreeComponents) {
  EXPECT_THROW(parse_extxyz("1\nProperties=species:S:1:pos:R:2:forces:R:3\nH 0 0 7 7 7\n", "bad.xyz"), Error);
}

}  // namespace
}  // namespace flashmace
