// build_neighbor_list (structure.h): a cell list over the atoms' periodic images, then two passes over
// the atoms, in parallel when built with OpenMP: count each atom's neighbours, then write them at
// offsets from the counts. The arrays are allocated once at their final size (no growth, which at
// tens of millions of atoms doubled the host memory), and the edge order is the serial one (by
// sender, then by bin and image) whatever the thread count.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "core/structure.h"
#include "core/vec3.h"

namespace flashmace {

namespace {


struct Image {
  int atom;
  std::array<int, 3> shift;
  std::array<double, 3> pos;
};

// Every atom image within `cutoff` of the atoms' bounding box, sorted by bin (stable: within a bin in
// the order images are made), and each bin's range of them.
class CellList {
 public:
  CellList(const Structure& s, double cutoff) {
    const int n = s.size();
    const double* x = s.positions.data();
    const double* h = s.cell.data();
    // Images per periodic direction: the cutoff over the spacing of lattice planes, plus the spread
    // of the atoms' fractional coordinates (positions need not be wrapped into the cell).
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
    for (int d = 0; d < 3; ++d) {
      lo_[d] = std::numeric_limits<double>::max();
      hi_[d] = -lo_[d];
      for (int i = 0; i < n; ++i) {
        lo_[d] = std::min(lo_[d], x[3 * i + d]);
        hi_[d] = std::max(hi_[d], x[3 * i + d]);
      }
      lo_[d] -= cutoff;
      hi_[d] += cutoff;
      // (bins at least the cutoff wide; at most 2^20 per direction, so that a bin's key fits int64
      // for atoms any distance apart)
      nbin_[d] = std::max<int64_t>(1, static_cast<int64_t>(std::min((hi_[d] - lo_[d]) / cutoff, 1048576.0)));
    }
    std::vector<Image> made;
    std::vector<int64_t> key;
    for (int a = -nimg[0]; a <= nimg[0]; ++a)
      for (int b = -nimg[1]; b <= nimg[1]; ++b)
        for (int c = -nimg[2]; c <= nimg[2]; ++c) {
          // (a shift that moves the atoms' bounding box clear of the region puts no image in it)
          bool reaches = true;
          for (int d = 0; d < 3; ++d)
            reaches = reaches && std::abs(a * h[d] + b * h[3 + d] + c * h[6 + d]) <= hi_[d] - lo_[d];
          if (!reaches) continue;
          for (int j = 0; j < n; ++j) {
            Image im{j, {a, b, c}, {}};
            bool inside = true;
            for (int d = 0; d < 3; ++d) {
              im.pos[d] = x[3 * j + d] + a * h[d] + b * h[3 + d] + c * h[6 + d];
              inside = inside && im.pos[d] >= lo_[d] && im.pos[d] <= hi_[d];
            }
            if (!inside) continue;
            made.push_back(im);
            key.push_back(bin_key(bin_of(im.pos.data())));
          }
        }
    // Bins as a dense table when there are not many more of them than images (bulk), else a map of
    // the occupied ones (a sparse cluster in a large box has few of its many bins).
    const int64_t nbins = nbin_[0] * nbin_[1] * nbin_[2], nimages = static_cast<int64_t>(made.size());
    if (nbins <= 4 * nimages + 1024) {
      start_.assign(static_cast<std::size_t>(nbins) + 1, 0);
      for (const int64_t k : key) ++start_[k + 1];
      std::partial_sum(start_.begin(), start_.end(), start_.begin());
      std::vector<int64_t> fill(start_.begin(), start_.end() - 1);
      images_.resize(made.size());
      for (int64_t i = 0; i < nimages; ++i) images_[fill[key[i]]++] = made[i];
      return;
    }
    std::vector<int64_t> order(made.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return key[p] < key[q]; });
    images_.reserve(made.size());
    for (std::size_t k = 0; k < order.size(); ++k) {
      images_.push_back(made[order[k]]);
      const int64_t kk = key[order[k]];
      auto it = ranges_.find(kk);
      if (it == ranges_.end()) it = ranges_.emplace(kk, std::pair<int64_t, int64_t>{static_cast<int64_t>(k), 0}).first;
      it->second.second = static_cast<int64_t>(k) + 1;
    }
  }

  std::array<int64_t, 3> bin_of(const double* p) const {
    std::array<int64_t, 3> b;
    for (int d = 0; d < 3; ++d)
      b[d] = std::min<int64_t>(nbin_[d] - 1, std::max<int64_t>(0, static_cast<int64_t>((p[d] - lo_[d]) /
                                                                                      (hi_[d] - lo_[d]) * nbin_[d])));
    return b;
  }

  // f(image) for the images in the 27 bins around bin b (and b), in a fixed order.
  template <typename F>
  void around(const std::array<int64_t, 3>& b, const F& f) const {
    for (int64_t da = -1; da <= 1; ++da)
      for (int64_t db = -1; db <= 1; ++db)
        for (int64_t dc = -1; dc <= 1; ++dc) {
          const std::array<int64_t, 3> o{b[0] + da, b[1] + db, b[2] + dc};
          if (o[0] < 0 || o[1] < 0 || o[2] < 0 || o[0] >= nbin_[0] || o[1] >= nbin_[1] || o[2] >= nbin_[2]) continue;
          int64_t begin = 0, end = 0;
          const int64_t key = bin_key(o);
          if (!start_.empty()) {
            begin = start_[key];
            end = start_[key + 1];
          } else if (const auto it = ranges_.find(key); it != ranges_.end()) {
            std::tie(begin, end) = it->second;
          }
          for (int64_t k = begin; k < end; ++k) f(images_[k]);
        }
  }

 private:
  int64_t bin_key(const std::array<int64_t, 3>& b) const { return (b[0] * nbin_[1] + b[1]) * nbin_[2] + b[2]; }

  std::array<double, 3> lo_{}, hi_{};
  std::array<int64_t, 3> nbin_{};
  std::vector<Image> images_;
  std::vector<int64_t> start_;  // [bins + 1]: each bin's first image (dense table), or empty
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> ranges_;  // else the occupied bins' ranges
};

}  // namespace

Graph build_neighbor_list(const Structure& s, double cutoff, double min_distance) {
  check_structure(s);
  const int n = s.size();
  const double* x = s.positions.data();
  const CellList cells(s, cutoff);
  const double cut2 = cutoff * cutoff, min2 = min_distance * min_distance;
  // f(image, r2) for the neighbours of atom i within the cutoff, in list order (MACE's convention,
  // mace_spec.md 2.4: sender i, receiver the image's atom; the zero-shift self pair is left out).
  auto neighbours = [&](int i, const auto& f) {
    cells.around(cells.bin_of(&x[3 * i]), [&](const Image& im) {
      if (im.atom == i && im.shift == std::array<int, 3>{0, 0, 0}) return;
      double r2 = 0;
      for (int d = 0; d < 3; ++d) r2 += (im.pos[d] - x[3 * i + d]) * (im.pos[d] - x[3 * i + d]);
      if (r2 < cut2) f(im, r2);
    });
  };

  std::vector<int64_t> offset(static_cast<std::size_t>(n) + 1, 0);
  std::vector<char> overlapping(static_cast<std::size_t>(n), 0);
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 256)
#endif
  for (int i = 0; i < n; ++i)
    neighbours(i, [&](const Image&, double r2) {
      ++offset[i + 1];
      if (r2 < min2) overlapping[i] = 1;
    });
  const auto first_bad = std::find(overlapping.begin(), overlapping.end(), 1);
  if (first_bad != overlapping.end()) {
    const int i = static_cast<int>(first_bad - overlapping.begin());
    neighbours(i, [&](const Image& im, double r2) {
      if (r2 < min2)
        throw Error("Atoms " + std::to_string(i) + " and " + std::to_string(im.atom) +
                    (im.atom == i ? " (a periodic image)" : "") + " are " + std::to_string(std::sqrt(r2)) +
                    " A apart, closer than " + std::to_string(min_distance) +
                    " A: overlapping atoms (check the coordinates and the cell)");
    });
  }
  std::partial_sum(offset.begin(), offset.end(), offset.begin());

  Graph g;
  g.num_nodes = n;
  const std::size_t E = static_cast<std::size_t>(offset[n]);
  g.sender.resize(E);
  g.receiver.resize(E);
  g.unit_shifts.resize(3 * E);
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 256)
#endif
  for (int i = 0; i < n; ++i) {
    int64_t e = offset[i];
    neighbours(i, [&](const Image& im, double) {
      g.sender[e] = i;
      g.receiver[e] = im.atom;
      for (int d = 0; d < 3; ++d) g.unit_shifts[3 * e + d] = im.shift[d];
      ++e;
    });
  }
  return g;
}

}  // namespace flashmace
