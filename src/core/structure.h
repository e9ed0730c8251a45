#pragma once
// An atomic structure and the graph (edge list) MACE runs on (mace_spec.md 2). Plain C++, no
// tensors, so that the CLI, the pair style and the tests can share it.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace flashmace {

struct Structure {
  std::vector<int> atomic_numbers;  // [N]
  std::vector<double> positions;    // [N*3], Angstrom
  std::array<double, 9> cell{};     // rows are lattice vectors
  std::array<bool, 3> pbc{false, false, false};
  int size() const { return static_cast<int>(atomic_numbers.size()); }
  bool periodic() const { return pbc[0] || pbc[1] || pbc[2]; }
  double volume() const;  // |det cell|
};

// Edge e: sender[e] -> receiver[e]; edge vector = x[receiver] - x[sender] + unit_shift[e] @ cell.
struct Graph {
  int num_nodes = 0;
  std::vector<int64_t> sender;
  std::vector<int64_t> receiver;
  std::vector<int> unit_shifts;  // [E*3], integer image offsets
  int num_edges() const { return static_cast<int>(sender.size()); }
};

// Rejects structures the model cannot evaluate, with a message naming the atom: empty, NaN or
// infinite coordinates, a degenerate periodic cell. (Overlapping atoms are caught by
// build_neighbor_list, which sees every pair.)
void check_structure(const Structure& s);

// Full neighbour list, every pair (including periodic images of an atom itself) with
// distance < cutoff; the zero-shift self pair is excluded. Binned, O(N) for dense systems.
// Throws flashmace::Error if two atoms are closer than min_distance.
Graph build_neighbor_list(const Structure& s, double cutoff, double min_distance = 0.1);

// The same edges in reverse order: another edge list (topology) of the same sizes, as a rebuilt
// neighbour list gives (tests and benchmarks of topology changes).
Graph reversed_edges(const Graph& g);

}  // namespace flashmace
