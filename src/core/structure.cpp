#include "core/structure.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/vec3.h"

namespace flashmace {

double Structure::volume() const {
  const auto c = cross(&cell[3], &cell[6]);
  return std::abs(dot(&cell[0], c.data()));
}

void check_structure(const Structure& s) {
  if (s.size() == 0) throw Error("Empty structure: there are no atoms to evaluate");
  if (s.positions.size() != 3 * s.atomic_numbers.size())
    throw Error("Structure has " + std::to_string(s.positions.size()) + " coordinates for " + std::to_string(s.size()) +
                " atoms");
  for (int i = 0; i < s.size(); ++i)
    for (int d = 0; d < 3; ++d)
      if (!std::isfinite(s.positions[3 * i + d]))
        throw Error("Atom " + std::to_string(i) + " has a non-finite coordinate (NaN or inf)");
  for (int d = 0; d < 3; ++d)
    if (s.pbc[d] &&
        !(std::isfinite(s.cell[3 * d]) && std::isfinite(s.cell[3 * d + 1]) && std::isfinite(s.cell[3 * d + 2])))
      throw Error("Cell vector " + std::to_string(d) + " is not finite");
  if (s.periodic() && !(s.volume() > 1e-8))
    throw Error("Periodic structure with a degenerate cell (volume " + std::to_string(s.volume()) + " A^3)");
}

Graph reversed_edges(const Graph& g) {
  Graph r = g;
  const std::size_t E = g.sender.size();
  for (std::size_t e = 0; e < E; ++e) {
    r.sender[e] = g.sender[E - 1 - e];
    r.receiver[e] = g.receiver[E - 1 - e];
    for (int k = 0; k < 3; ++k) r.unit_shifts[3 * e + k] = g.unit_shifts[3 * (E - 1 - e) + k];
  }
  return r;
}

}  // namespace flashmace
