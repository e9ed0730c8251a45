#include "core/lattice.h"

#include <fstream>
#include <random>
#include <sstream>

#include "core/error.h"

namespace flashmace {

int atoms_per_cell(const std::string& kind) {
  if (kind == "fcc") return 4;
  if (kind == "bcc") return 2;
  throw Error("Unknown lattice '" + kind + "' (use fcc or bcc)");
}

Structure make_cubic_lattice(const std::string& kind, double a, int n, const std::vector<int>& atomic_numbers,
                             double perturbation, uint32_t seed) {
  static const double fcc[4][3] = {{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}};
  static const double bcc[2][3] = {{0, 0, 0}, {0.5, 0.5, 0.5}};
  const int per_cell = atoms_per_cell(kind);
  if (n < 1 || a <= 0 || atomic_numbers.empty()) throw Error("Lattice needs n >= 1, a > 0 and at least one element");
  const double(*basis)[3] = kind == "fcc" ? fcc : bcc;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> shake(-perturbation, perturbation);
  std::uniform_int_distribution<std::size_t> pick(0, atomic_numbers.size() - 1);
  Structure s;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k)
        for (int b = 0; b < per_cell; ++b) {
          s.atomic_numbers.push_back(atomic_numbers[pick(rng)]);
          const double cell[3] = {double(i), double(j), double(k)};
          for (int d = 0; d < 3; ++d) s.positions.push_back((cell[d] + basis[b][d]) * a + shake(rng));
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
