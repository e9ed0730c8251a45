#pragma once
// ReferenceModel internals, shared with tests that inspect intermediates.
#include <ATen/ATen.h>

#include "model/mace_forward.h"
#include "model/mace_params.h"
#include "model/reference_model.h"

namespace flashmace {

struct ReferenceModel::Impl {
  MaceParams params;
  at::Device device{at::kCPU};
  StageTimer* timer = nullptr;
};

// The tensors the forward pass takes, built from a structure and its graph on the model's device.
struct EdgeInputs {
  GraphTensors graph;
  at::Tensor vectors;  // [E, 3] edge vectors in the model dtype
};
EdgeInputs make_edge_inputs(const MaceParams& params, const Structure& s, const Graph& g);

// Energies and edge gradients of one evaluation (mace_spec.md 10.2).
struct EdgeGradients {
  at::Tensor node_energy;  // [nlocal] float64, E0 included
  at::Tensor interaction;  // [nlocal] float64, without E0 (FD tests difference it: E0 would swamp it)
  at::Tensor grad;         // [E, 3] float64 g_e = dE/dv_e; undefined unless want_grad
};
// The reference path on tensors: autograd through mace_interaction_energy. vectors: [E, 3], any
// float dtype (cast to the model's); the halo exchange runs inside autograd (see halo_exchange_op.h).
EdgeGradients reference_edge_gradients(const MaceParams& params, const GraphTensors& graph, const at::Tensor& vectors,
                                       HaloExchanger* halo, int64_t nlocal, bool want_grad, StageTimer* timer);

}  // namespace flashmace
