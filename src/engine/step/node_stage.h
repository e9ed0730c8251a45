#pragma once
// The node work of one interaction layer for a block of owned atoms (mace_spec.md 6.3-8), forward
// and explicit backward: normalise the projected message, element skip connection, symmetric
// contraction, product linear, residual, readout; in NonLinear blocks (docs/model-format.md) the
// normalised message plus linear_res of the atom's own up-projected features, gated, through
// linear_2, and a plain skip linear. No autograd. Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "engine/ops/irreps_linear.h"
#include "engine/ops/sc_op.h"
#include "engine/ops/species_linear.h"
#include "model/mace_params.h"

namespace flashmace {

// A layer's node linears in the fast engine's form (irreps_linear.h), built once per model. features:
// the column layout of the layer's node features, message sums after the projection and their
// gradients (h, mlin, m: the symmetric contraction reads m in it); the contraction's output B stays
// mul_ir. NonLinear blocks take mul_ir only.
struct NodeLinears {
  NodeLinears(const MaceParams& model, int layer, IrrepsLayout features = IrrepsLayout::MulIr);
  SpeciesLinear skip;               // the element skip connection (skip_tp; not in NonLinear blocks)
  // NonLinear blocks: skip_tp (in -> out, no element dependence), linear_res (edge -> gate input)
  // and linear_2 (target -> target, after the gate).
  struct NonLinear {
    IrrepsLinear skip, residual, output;
  };
  std::optional<NonLinear> nonlinear;
  IrrepsLinear product;             // product_linear
  std::vector<IrrepsLinear> readout;  // readout[0] (and readout[1] in the last layer's MLP)
  // The energy's gradient entering the readout's backward pass, the same for every atom: the model's
  // scale through readout[0]'s transpose, [1, channels] (added to dE/dh's 0e block); in the last
  // layer through readout[1]'s transpose and the SiLU's normalisation, [1, dim(mlp)].
  at::Tensor readout_gradient;
};

struct NodeChunkInput {
  at::Tensor mlin;     // [n, dim(target)] projected message sums: divided by avg_num_neighbors already
                       // (folded into the projection) without a density block, unnormalised with one
  at::Tensor density;  // [n] density sums (density and NonLinear blocks)
  at::Tensor h_in;     // [n, dim(in)] the layer's input features (residual blocks)
  at::Tensor hu_in;    // [n, dim(edge)] their linear_up (NonLinear blocks)
  at::Tensor species;  // [n]
  SpeciesGroups groups;  // the rows of each element present, for the skip connection's GEMMs
};

struct NodeChunkState {
  at::Tensor m;                 // [n, dim(target)] normalised message (after the skip in non-residual blocks;
                                // NonLinear blocks: [n, dim(gate input)], the gate's input)
  at::Tensor sc_a;              // [n, C K] symmetric-contraction input (mul_ir; may alias m)
  at::Tensor h;                 // [n, dim(out)]
  at::Tensor readout_pre;       // [n, dim(mlp)] last layer: the readout MLP's pre-activation
};

struct NodeChunkOutput {
  at::Tensor h;       // [n, dim(out)]
  at::Tensor energy;  // [n] the layer's readout
};

class StageTimer;

// sc: the layer's symmetric-contraction executor. A timer, if given, is charged "sc_forward" /
// "sc_backward" for the contraction and "nodes_forward" / "nodes_backward" for the rest.
NodeChunkOutput node_chunk_forward(const MaceParams& model, int layer, const NodeLinears& linears, const ScOp& sc,
                                   const NodeChunkInput& in, NodeChunkState* state, StageTimer* timer = nullptr);

struct NodeChunkGradients {
  at::Tensor mlin;     // [n, dim(target)]
  at::Tensor density;  // [n] (density blocks)
  at::Tensor h_in;     // [n, dim(in)] (residual blocks; undefined otherwise)
  at::Tensor hu_in;    // [n, dim(edge)] (NonLinear blocks)
};

// grad_h: dE/dh [n, dim(out)] from the next layer, to which the readout's gradient is added in place.
NodeChunkGradients node_chunk_backward(const MaceParams& model, int layer, const NodeLinears& linears, const ScOp& sc,
                                       const NodeChunkInput& in, NodeChunkState& state, const at::Tensor& grad_h,
                                       StageTimer* timer = nullptr);

}  // namespace flashmace
