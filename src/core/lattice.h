#pragma once
// Test and benchmark structures: perturbed cubic lattices, and LAMMPS data files (atomic style).
#include <cstdint>
#include <string>
#include <vector>

#include "core/structure.h"

namespace flashmace {

// n x n x n conventional cells of an fcc (4 atoms/cell) or bcc (2 atoms/cell) lattice with lattice
// constant a; elements are drawn at random from `atomic_numbers`; every coordinate is displaced
// uniformly in [-perturbation, perturbation]. Deterministic for a given seed.
Structure make_cubic_lattice(const std::string& kind, double a, int n, const std::vector<int>& atomic_numbers,
                             double perturbation, uint32_t seed);
int atoms_per_cell(const std::string& kind);  // throws on unknown kinds

// A LAMMPS data file with "Atoms # atomic" lines (id type x y z ...), orthogonal or triclinic box,
// periodic in all directions; type_elements[t-1] is the atomic number of type t.
Structure read_lammps_data(const std::string& path, const std::vector<int>& type_elements);

}  // namespace flashmace
