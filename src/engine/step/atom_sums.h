#pragma once
// Forces, virial and per-atom virials of one domain from its receiver-sorted edge gradients
// (mace_spec.md 10.2-10.3), float64, deterministic: the CUDA kernel of atom_sums_kernels.h for
// forces and virial on the GPU, per-atom segment sums over the topology's cached counts otherwise.
// Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include "engine/step/edge_topology.h"

namespace flashmace {

struct AtomSumsRequest {
  bool forces = false, virial = false, atom_virial = false;
};

struct AtomSums {
  at::Tensor forces;       // [padded_atoms, 3]
  at::Tensor virial;       // [3, 3]
  at::Tensor atom_virial;  // [padded_atoms, 6] LAMMPS Voigt order
};

// grad [padded_edges, 3] (model dtype) and v64 [padded_edges, 3] (float64) in topo's order; the
// topology was built with atom_sums for forces and per-atom virials.
AtomSums atom_sums(const EdgeTopology& topo, const at::Tensor& grad, const at::Tensor& v64, const AtomSumsRequest& want);

}  // namespace flashmace
