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

}  // namespace flashmace
