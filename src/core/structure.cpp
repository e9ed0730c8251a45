#include "core/structure.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/error.h"

namespace flashmace {

namespace {

std::array<double, 3> cross(const double* a, const double* b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
double dot(const double* a, const double* b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

}  // namespace

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

Graph build_neighbor_list(const Structure& s, double cutoff, double min_distance) {
  check_structure(s);
  const int n = s.size();
  const double* x = s.positions.data();
  const double* h = s.cell.data();

  // Images needed per periodic direction: the cutoff over the spacing of lattice planes, plus the
  // spread of the atoms' fractional coordinates (positions need not be wrapped into the cell).
  std::array<int, 3> nimg{0, 0, 0};
  if (s.periodic()) {
    const double vol = s.volume();
    for (int d = 0; d < 3; ++d) {
      if (!s.pbc[d]) continue;
      const auto c = cross(&h[3 * ((d + 1) % 3)], &h[3 * ((d + 2) % 3)]);
      const double plane_spacing = vol / std::sqrt(dot(c.data(), c.data()));
      double fmin = std::numeric_limits<double>::max(), fmax = -fmin;
      for (int i = 0; i < n; ++i) {
        const double f = dot(&x[3 * i], c.data()) / vol * ((dot(&h[3 * d], c.data()) > 0) ? 1 : -1);
        fmin = std::min(fmin, f);
        fmax = std::max(fmax, f);
      }
      nimg[d] = static_cast<int>(std::ceil(cutoff / plane_spacing + (fmax - fmin))) + 1;
    }
  }

  // Bin every atom image that lies within `cutoff` of the atoms' bounding box.
  std::array<double, 3> lo, hi;
  for (int d = 0; d < 3; ++d) {
    lo[d] = std::numeric_limits<double>::max();
    hi[d] = -lo[d];
    for (int i = 0; i < n; ++i) {
      lo[d] = std::min(lo[d], x[3 * i + d]);
      hi[d] = std::max(hi[d], x[3 * i + d]);
    }
    lo[d] -= cutoff;
    hi[d] += cutoff;
  }
  std::array<int64_t, 3> nbin;
  for (int d = 0; d < 3; ++d) nbin[d] = std::max<int64_t>(1, static_cast<int64_t>((hi[d] - lo[d]) / cutoff));
  auto bin_of = [&](const double* p, int d) {
    return std::min<int64_t>(nbin[d] - 1,
                             std::max<int64_t>(0, static_cast<int64_t>((p[d] - lo[d]) / (hi[d] - lo[d]) * nbin[d])));
  };
  struct Image {
    int atom;
    std::array<int, 3> shift;
    std::array<double, 3> pos;
  };
  std::unordered_map<int64_t, std::vector<Image>> bins;
  for (int a = -nimg[0]; a <= nimg[0]; ++a)
    for (int b = -nimg[1]; b <= nimg[1]; ++b)
      for (int c = -nimg[2]; c <= nimg[2]; ++c)
        for (int j = 0; j < n; ++j) {
          Image im{j, {a, b, c}, {}};
          bool inside = true;
          for (int d = 0; d < 3; ++d) {
            im.pos[d] = x[3 * j + d] + a * h[d] + b * h[3 + d] + c * h[6 + d];
            inside = inside && im.pos[d] >= lo[d] && im.pos[d] <= hi[d];
          }
          if (!inside) continue;
          const int64_t key =
              (bin_of(im.pos.data(), 0) * nbin[1] + bin_of(im.pos.data(), 1)) * nbin[2] + bin_of(im.pos.data(), 2);
          bins[key].push_back(im);
        }

  Graph g;
  g.num_nodes = n;
  const double cut2 = cutoff * cutoff;
  for (int i = 0; i < n; ++i) {
    std::array<int64_t, 3> bi{bin_of(&x[3 * i], 0), bin_of(&x[3 * i], 1), bin_of(&x[3 * i], 2)};
    for (int64_t da = -1; da <= 1; ++da)
      for (int64_t db = -1; db <= 1; ++db)
        for (int64_t dc = -1; dc <= 1; ++dc) {
          const int64_t ba = bi[0] + da, bb = bi[1] + db, bc = bi[2] + dc;
          if (ba < 0 || bb < 0 || bc < 0 || ba >= nbin[0] || bb >= nbin[1] || bc >= nbin[2]) continue;
          auto it = bins.find((ba * nbin[1] + bb) * nbin[2] + bc);
          if (it == bins.end()) continue;
          for (const Image& im : it->second) {
            const bool self = im.atom == i && im.shift == std::array<int, 3>{0, 0, 0};
            if (self) continue;
            double r2 = 0;
            for (int d = 0; d < 3; ++d) r2 += (im.pos[d] - x[3 * i + d]) * (im.pos[d] - x[3 * i + d]);
            if (r2 >= cut2) continue;
            if (r2 < min_distance * min_distance)
              throw Error("Atoms " + std::to_string(i) + " and " + std::to_string(im.atom) +
                          (im.atom == i ? " (a periodic image)" : "") + " are " + std::to_string(std::sqrt(r2)) +
                          " A apart, closer than " + std::to_string(min_distance) +
                          " A: overlapping atoms (check the coordinates and the cell)");
            // MACE's convention (mace_spec.md 2.4): sender i, receiver = the image atom.
            g.sender.push_back(i);
            g.receiver.push_back(im.atom);
            g.unit_shifts.insert(g.unit_shifts.end(), im.shift.begin(), im.shift.end());
          }
        }
  }
  return g;
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
