#include "core/lattice.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <random>
#include <sstream>

#include "core/error.h"

namespace flashmace {

namespace {

// A conventional cubic cell: fractional sites and, for ordered compounds, each site's sublattice (the
// index of its element in the caller's list); random alloys have none.
struct CubicBasis {
  std::vector<std::array<double, 3>> sites;
  std::vector<int> sublattice;  // empty: random alloy
  const char* elements;         // what the element list means, for the message
};

const CubicBasis* cubic_basis(const std::string& kind) {
  static const CubicBasis fcc{{{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}}, {}, ""};
  static const CubicBasis bcc{{{0, 0, 0}, {0.5, 0.5, 0.5}}, {}, ""};
  static const CubicBasis rocksalt{{{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5},
                                    {0.5, 0, 0}, {0, 0.5, 0}, {0, 0, 0.5}, {0.5, 0.5, 0.5}},
                                   {0, 0, 0, 0, 1, 1, 1, 1}, "cation and anion, e.g. Mg,O"};
  static const CubicBasis perovskite{{{0, 0, 0}, {0.5, 0.5, 0.5}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}},
                                     {0, 1, 2, 2, 2}, "A, B and X of ABX3, e.g. Sr,Ti,O"};
  if (kind == "fcc") return &fcc;
  if (kind == "bcc") return &bcc;
  if (kind == "rocksalt") return &rocksalt;
  if (kind == "perovskite") return &perovskite;
  return nullptr;
}

}  // namespace

int atoms_per_cell(const std::string& kind) {
  const CubicBasis* basis = cubic_basis(kind);
  if (!basis) throw Error("Unknown lattice '" + kind + "' (use fcc, bcc, rocksalt or perovskite)");
  return static_cast<int>(basis->sites.size());
}

Structure make_cubic_lattice(const std::string& kind, double a, int n, const std::vector<int>& atomic_numbers,
                             double perturbation, uint32_t seed) {
  const int per_cell = atoms_per_cell(kind);
  const CubicBasis& basis = *cubic_basis(kind);
  if (n < 1 || a <= 0 || atomic_numbers.empty()) throw Error("Lattice needs n >= 1, a > 0 and at least one element");
  const bool ordered = !basis.sublattice.empty();
  const std::size_t sublattices = ordered ? 1 + *std::max_element(basis.sublattice.begin(), basis.sublattice.end()) : 0;
  if (ordered && atomic_numbers.size() != sublattices)
    throw Error("Lattice " + kind + " needs " + std::to_string(sublattices) + " elements (" + basis.elements +
                "), got " + std::to_string(atomic_numbers.size()));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> shake(-perturbation, perturbation);
  std::uniform_int_distribution<std::size_t> pick(0, atomic_numbers.size() - 1);
  Structure s;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k)
        for (int b = 0; b < per_cell; ++b) {
          s.atomic_numbers.push_back(atomic_numbers[ordered ? basis.sublattice[b] : pick(rng)]);
          const double cell[3] = {double(i), double(j), double(k)};
          for (int d = 0; d < 3; ++d) s.positions.push_back((cell[d] + basis.sites[b][d]) * a + shake(rng));
        }
  s.cell = {n * a, 0, 0, 0, n * a, 0, 0, 0, n * a};
  s.pbc = {true, true, true};
  return s;
}

Structure read_lammps_data(const std::string& path, const std::vector<int>& type_elements) {
  std::ifstream in(path);
  if (!in) throw Error("Cannot open LAMMPS data file " + path);
  const std::string where = "LAMMPS data file " + path + ": ";
  Structure s;
  double lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0}, xy = 0, xz = 0, yz = 0;
  long natoms = -1;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    if (line.find("atoms") != std::string::npos && natoms < 0 && line.find("Atoms") == std::string::npos) ls >> natoms;
    for (int d = 0; d < 3; ++d) {
      const std::string key = std::string(1, "xyz"[d]) + "lo " + std::string(1, "xyz"[d]) + "hi";
      if (line.find(key) != std::string::npos) std::istringstream(line) >> lo[d] >> hi[d];
    }
    if (line.find("xy xz yz") != std::string::npos) std::istringstream(line) >> xy >> xz >> yz;
    if (line.rfind("Atoms", 0) == 0) {
      if (line.find('#') != std::string::npos && line.find("atomic") == std::string::npos)
        throw Error(where + "only atom_style atomic data is supported (" + line + ")");
      std::getline(in, line);  // blank line after the section header
      for (long i = 0; i < natoms; ++i) {
        if (!std::getline(in, line)) throw Error(where + "fewer Atoms lines than the header's atom count");
        std::istringstream al(line);
        long id = 0;
        int type = 0;
        double x[3];
        if (!(al >> id >> type >> x[0] >> x[1] >> x[2])) throw Error(where + "cannot read Atoms line '" + line + "'");
        if (type < 1 || type > static_cast<int>(type_elements.size()))
          throw Error(where + "atom " + std::to_string(id) + " has type " + std::to_string(type) + " but only " +
                      std::to_string(type_elements.size()) + " type elements were given");
        s.atomic_numbers.push_back(type_elements[type - 1]);
        s.positions.insert(s.positions.end(), x, x + 3);
      }
    }
  }
  if (natoms < 0 || static_cast<long>(s.atomic_numbers.size()) != natoms)
    throw Error(where + "no complete Atoms section");
  // LAMMPS's box: a = (lx,0,0), b = (xy,ly,0), c = (xz,yz,lz)
  s.cell = {hi[0] - lo[0], 0, 0, xy, hi[1] - lo[1], 0, xz, yz, hi[2] - lo[2]};
  s.pbc = {true, true, true};
  return s;
}

}  // namespace flashmace
