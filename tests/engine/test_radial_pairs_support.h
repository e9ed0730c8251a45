#pragma once
// The ghost-atom domain and its edges shared by the reverse-edge pair tests on the CPU
// (engine/test_radial_pairs.cpp) and on CUDA (gpu/test_gpu_radial_pairs.cpp).
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "core/lattice.h"
#include "core/local_graph.h"

namespace flashmace::testing {

struct Edges {
  at::Tensor sender, receiver, vectors;  // int64, int64, [E, 3] float64 on the CPU
};

// A perturbed fcc box as one domain whose periodic images are explicit ghost atoms.
inline LocalGraph ghost_domain(uint64_t seed) {
  std::vector<int> owner;
  return periodic_local_graph(make_cubic_lattice("fcc", 3.61, 2, {29}, 0.1, seed), 5.0, &owner);
}

// The edges of a ghost-atom domain (ghosts are explicit images: vectors from positions).
inline Edges domain_edges(const LocalGraph& lg) {
  const int64_t E = lg.num_edges();
  std::vector<double> v(3 * E);
  for (int64_t e = 0; e < E; ++e)
    for (int d = 0; d < 3; ++d)
      v[3 * e + d] = lg.positions[3 * lg.receiver[e] + d] - lg.positions[3 * lg.sender[e] + d];
  return {at::tensor(lg.sender), at::tensor(lg.receiver), at::tensor(v).view({E, 3})};
}

}  // namespace flashmace::testing
