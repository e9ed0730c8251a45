#pragma once
// Test and benchmark structures: perturbed cubic lattices, and LAMMPS data files (atomic style).
#include <cstdint>
#include <string>
#include <vector>

#include "core/structure.h"

namespace flashmace {

// n x n x n conventional cells of a cubic lattice with lattice constant a, every coordinate displaced
// uniformly in [-perturbation, perturbation]; deterministic for a given seed. Kinds:
//   fcc (4 atoms/cell), bcc (2): random alloys, each atom's element drawn from `atomic_numbers`;
//   rocksalt (8): atomic_numbers = {cation, anion} on two interpenetrating fcc lattices (MgO, NaCl);
//   perovskite (5): atomic_numbers = {A, B, X} of the cubic ABX3 structure (SrTiO3: A at the corner,
//                   B at the body centre, X at the face centres).
Structure make_cubic_lattice(const std::string& kind, double a, int n, const std::vector<int>& atomic_numbers,
                             double perturbation, uint32_t seed);
int atoms_per_cell(const std::string& kind);  // throws on unknown kinds

// A LAMMPS data file with "Atoms # atomic" lines (id type x y z ...), orthogonal or triclinic box,
// periodic in all directions; type_elements[t-1] is the atomic number of type t.
Structure read_lammps_data(const std::string& path, const std::vector<int>& type_elements);

}  // namespace flashmace
