#include "core/local_graph.h"

#include <map>
#include <tuple>

namespace flashmace {

LocalGraph periodic_local_graph(const Structure& s, double cutoff, std::vector<int>* ghost_owner) {
  const Graph g = build_neighbor_list(s, cutoff);
  LocalGraph lg;
  lg.nlocal = s.size();
  lg.atomic_numbers = s.atomic_numbers;
  lg.positions = s.positions;
  ghost_owner->clear();
  // An edge (sender j, receiver i, shift S) has vector x_i - (x_j - S cell): its sender is the image
  // of j displaced by -S. Zero-shift senders are local; every other (j, -S) becomes one ghost.
  std::map<std::tuple<int64_t, int, int, int>, int64_t> ghost_index;
  for (int e = 0; e < g.num_edges(); ++e) {
    // Neighbour lists are symmetric, so (i as receiver) <- (j as sender) covers every pair.
    const int64_t i = g.receiver[e], j = g.sender[e];
    const int a = g.unit_shifts[3 * e], b = g.unit_shifts[3 * e + 1], c = g.unit_shifts[3 * e + 2];
    int64_t node = j;
    if (a != 0 || b != 0 || c != 0) {
      const auto key = std::make_tuple(j, -a, -b, -c);
      auto it = ghost_index.find(key);
      if (it == ghost_index.end()) {
        node = lg.nlocal + static_cast<int64_t>(ghost_owner->size());
        ghost_index.emplace(key, node);
        ghost_owner->push_back(static_cast<int>(j));
        lg.atomic_numbers.push_back(s.atomic_numbers[j]);
        for (int d = 0; d < 3; ++d)
          lg.positions.push_back(s.positions[3 * j + d] - a * s.cell[d] - b * s.cell[3 + d] - c * s.cell[6 + d]);
      } else {
        node = it->second;
      }
    }
    lg.sender.push_back(node);
    lg.receiver.push_back(i);
  }
  lg.nghost = static_cast<int>(ghost_owner->size());
  return lg;
}

void OwnerMapExchanger::forward(double* rows, int ncols) {
  for (std::size_t g = 0; g < owner_.size(); ++g) {
    const double* src = rows + static_cast<std::size_t>(owner_[g]) * ncols;
    double* dst = rows + (nlocal_ + g) * ncols;
    for (int k = 0; k < ncols; ++k) dst[k] = src[k];
  }
}

void OwnerMapExchanger::reverse(double* rows, int ncols) {
  for (std::size_t g = 0; g < owner_.size(); ++g) {
    double* src = rows + (nlocal_ + g) * ncols;
    double* dst = rows + static_cast<std::size_t>(owner_[g]) * ncols;
    for (int k = 0; k < ncols; ++k) {
      dst[k] += src[k];
      src[k] = 0.0;
    }
  }
}

}  // namespace flashmace
