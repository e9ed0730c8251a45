#pragma once
// The reference path: MACE's forward pass as a direct transcription of mace_spec.md, one
// function per block, plain ATen ops so that autograd gives forces. The oracle for fast paths.
#include <ATen/ATen.h>

#include <map>
#include <string>

#include "core/local_graph.h"
#include "model/mace_params.h"
#include "model/stage_timer.h"

namespace flashmace {

struct GraphTensors {
  at::Tensor species;   // [N] int64 element index (position in the model's atomic_numbers)
  at::Tensor sender;    // [E] int64
  at::Tensor receiver;  // [E] int64
};

// Optional named intermediates (the same names as the shared reference files use).
using Trace = std::map<std::string, at::Tensor>;

// Radial edge features [E, n_basis] (mace_spec.md 3.3): the Bessel basis of the (optionally
// transformed) distance r [E, 1] times the polynomial envelope; z_*: atomic numbers of the ends.
at::Tensor edge_features(const MaceParams& model, const at::Tensor& r, const at::Tensor& z_sender,
                         const at::Tensor& z_receiver);

// A layer's readout [N, 1] from its output features h (only the 0e block is read); the last layer's
// is the non-linear MLP with irreps `mlp`.
at::Tensor readout(const InteractionParams& layer, const at::Tensor& h, int channels, bool last, const Irreps& mlp);

// Interaction energy per node, scale * (ZBL + sum of readouts) + shift (mace_spec.md 8), from
// edge vectors v_e = x[receiver] - x[sender] + shift_e ([E, 3]). E0 is not included.
// With a halo exchanger (domain-decomposed graph), ghost rows of the node features are refreshed
// from their owners after every layer but the last; only local rows of the result are meaningful.
// A timer, if given, is charged per stage (spherical_harmonics, radial, tensor_product, linears,
// symmetric_contraction, readout, halo_exchange).
at::Tensor mace_interaction_energy(const MaceParams& model, const GraphTensors& graph, const at::Tensor& edge_vectors,
                                   Trace* trace = nullptr, HaloExchanger* halo = nullptr, StageTimer* timer = nullptr);

}  // namespace flashmace
