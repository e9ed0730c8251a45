#pragma once
// One chunk of edges of one interaction layer (mace_spec.md 6.1-6.3), forward and backward:
// geometry -> radial MLP -> tensor product with the senders' features -> sum over each receiver's
// edges. The chunk's edges are consecutive in receiver order; its receivers are rows
// [row0, row0 + nrows) of the layer's owned atoms. Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "engine/engine_options.h"
#include "engine/ops/conv_tp_op.h"
#include "engine/ops/edge_geometry_op.h"
#include "engine/ops/edge_terms.h"
#include "engine/ops/first_layer.h"
#include "engine/ops/nonlinear_radial.h"
#include "engine/ops/radial_pairs.h"
#include "engine/ops/radial_spline.h"
#include "engine/ops/tf32_gemm.h"
#include "model/mace_params.h"

namespace flashmace {

struct MessageChunkInput {
  at::Tensor vectors;     // [Ec, 3] model dtype
  at::Tensor z_sender;    // [Ec] atomic numbers
  at::Tensor z_receiver;  // [Ec]
  at::Tensor species_sender, species_receiver;  // [Ec] element indices (NonLinear layers: their radial MLPs read them)
  at::Tensor x_table;     // [X, dim(in)] up-projected sender features: per node, or per species in layer 0
  at::Tensor x_index;     // [Ec] rows of x_table
  at::Tensor rows;        // [Ec] receiver row minus row0 (non-decreasing)
  int64_t nrows = 0;
  at::Tensor row_ptr;                  // [nrows + 1] CSR of `rows` (edges of row r: row_ptr[r] .. row_ptr[r+1]-1)
  bool x_gradient = false;             // whether backward() must produce d(x_table)
  const XIndexCsr* x_csr = nullptr;    // xindex_csr(x_index, X) if known (else built by backward())
  const RadialPairs* pairs = nullptr;  // set: the radial MLP runs once per pair (radial_pairs.h)
};

// What the forward pass of a chunk leaves for its backward (kept when the plan does not recompute).
struct MessageChunkState {
  EdgeGeometry geometry;            // computed by message_chunk_prepare unless set before (another layer's)
  bool prepared = false;            // message_chunk_prepare ran
  std::vector<at::Tensor> mlp_pre;  // per radial row: [Ec, ...], or [U, ...] with pairs
  at::Tensor radial;                // [Ec or U, weight_numel] (not in reassociated layers)
  at::Tensor hidden;                // [Ec or U, H] the radial MLP's last hidden layer (reassociated layers)
  at::Tensor density;               // [Ec, 1] density blocks
  at::Tensor dR_rows;               // conv_tp_dR_rows, made ahead of the backward pass (or undefined)
  NonlinearRadialState nonlinear;   // NonLinear layers: their radial MLPs' (radial and density set too)
};

struct MessageChunkOutput {
  at::Tensor aggregate;  // [nrows, dim(mid)] sum of the chunk's messages per receiver (undefined when `sums` is set)
  at::Tensor sums;       // a reassociated layer that folds its projection (FirstLayerOp::fold_projection): its S
  at::Tensor density;    // [nrows] sum of the density term per receiver (density blocks)
};

class StageTimer;

// What one layer's message stage runs with, built once per model.
struct MessageLayer {
  // reassociate: run the layer as first_layer.h (its x_table rows are then per sender species slot).
  // tf32: EngineOptions::tf32. Auto runs the output layer of a per-edge layer in split TF32 where
  // SplitTf32Linear applies (float32 on a recent GPU).
  MessageLayer(const InteractionParams& layer, ConvTPOp tp, Choice tf32 = Choice::Off, bool reassociate = false,
               int64_t split_min_rows = kSplitTf32MinRows)
      : params(&layer),
        radial(fold_radial_mlp(layer.radial_layers)),
        tp(std::move(tp)),
        tf32(tf32 == Choice::On),
        split_min_rows(split_min_rows) {
    if (reassociate) first.emplace(this->tp.descriptor(), radial.back());
    if (tf32 == Choice::Auto && !reassociate && radial.size() > 1 && SplitTf32Linear::applies(radial.back()))
      output.emplace(radial.back());
  }
  const InteractionParams* params;    // the model's layer (density weights)
  std::vector<at::Tensor> radial;     // fold_radial_mlp of its radial MLP
  ConvTPOp tp;                        // its fused tensor-product kernels (conv_tp_op.h)
  bool tf32;                          // radial-MLP GEMMs in plain TF32 (tf32 yes: float32 on CUDA)
  std::optional<SplitTf32Linear> output;  // set: the radial MLP's output layer (forward) in split TF32
  int64_t split_min_rows;                 // ... in chunks of at least this many radial rows
  std::optional<FirstLayerOp> first;  // set: the layer runs reassociated (no R, no per-edge TP)
  // set (apply_cutoff false, other blocks): the envelope multiplies R and the density term (no
  // reverse-edge pairs, spline, reassociation or split-TF32 output layer with it: fast_engine.cpp).
  std::optional<InteractionEnvelope> envelope;
  // set (a NonLinear block): R and the density term from nonlinear_radial.h's MLPs, which read the
  // edge's elements (no reverse-edge pairs, spline or reassociation); `radial` is then empty.
  std::optional<NonlinearRadial> nonlinear;
  // set (radial spline): R, or a reassociated layer's last hidden activation, read from a table
  // instead of the MLP (no mlp_pre kept; the backward pass hands dE/dr to the edges directly).
  std::optional<RadialSplineOp> spline;
  // Whether reverse edges can share one radial MLP row (radial_pairs.h): not where the MLPs read the
  // edge's elements or the envelope multiplies their outputs per edge.
  bool shares_pairs() const { return !nonlinear && !envelope; }
};

// The part of a chunk's forward pass that needs only the edge vectors: geometry and radial MLP
// (state->geometry, mlp_pre, radial or hidden). It can run ahead of the layer's features (on a
// second CUDA stream while earlier layers run: fast_engine.cpp).
void message_chunk_prepare(const EdgeGeometryOp& geometry, const MessageLayer& layer, const MessageChunkInput& in,
                           MessageChunkState* state, StageTimer* timer = nullptr);

// geometry: the model's edge geometry (edge_geometry_op.h). Runs message_chunk_prepare unless the
// state was prepared already. aggregate = false recomputes only what the backward pass needs
// (geometry, radial MLP), not the messages. A timer, if given, is charged per piece (edge_geometry,
// radial_mlp, tp_forward; tp_backward, radial_backward, geometry_backward).
MessageChunkOutput message_chunk_forward(const EdgeGeometryOp& geometry, const MessageLayer& layer,
                                         const MessageChunkInput& in, MessageChunkState* state, bool aggregate = true,
                                         StageTimer* timer = nullptr);

// The backward pass in two parts. The first needs the features: from d(aggregate) [nrows,
// dim(mid)] (or, where the layer folds its projection, d(projected sums) [nrows, dim(target)]) it
// gives the gradients of the edge terms (radial weights, dR summed into state.dR_rows if defined, or,
// reassociated, the radial MLP's last hidden layer; harmonics) and, if in.x_gradient, adds
// d(x_table) into *x_table_grad.
struct MessageEdgeGrads {
  at::Tensor radial;     // dE/dR, per edge or per shared radial row (not in reassociated layers)
  at::Tensor hidden;     // dE/d(hidden), per edge (reassociated layers)
  at::Tensor harmonics;  // dE/dY [Ec, dim(sh)]
};
MessageEdgeGrads message_chunk_backward_messages(const MessageLayer& layer, const MessageChunkInput& in,
                                                 const MessageChunkState& state, const at::Tensor& grad_aggregate,
                                                 at::Tensor* x_table_grad, StageTimer* timer = nullptr);
// dE/d(harmonics) and dE/d(radial features) of a chunk's edges, held back for another layer that
// reads the same edge geometry: the geometry's backward pass is linear in them, so it runs once on
// their sums.
struct GeometryGradients {
  at::Tensor harmonics;  // [Ec, dim(sh)]
  at::Tensor ef;         // [Ec, n_basis] (undefined: none)
};

// The second needs only the edge terms: with d(density) [nrows] (density blocks) it returns dE/dv
// [Ec, 3] through the radial MLP and the geometry, the geometry's part with `pending` (another
// layer's, on the same geometry) added in; with `hold`, it adds its geometry gradients to *hold and
// returns an undefined tensor instead. hold and pending only for layers whose dE/dv is all through the
// geometry (no envelope inside the interaction, spline or NonLinear radial). Consumes the state.
at::Tensor message_chunk_backward_edges(const EdgeGeometryOp& geometry, const MessageLayer& layer,
                                        const MessageChunkInput& in, MessageChunkState& state,
                                        const MessageEdgeGrads& grads, const at::Tensor& grad_density,
                                        StageTimer* timer = nullptr, GeometryGradients* hold = nullptr,
                                        const GeometryGradients* pending = nullptr);

// Both parts: dE/dv [Ec, 3], and d(x_table) added into *x_table_grad if in.x_gradient.
at::Tensor message_chunk_backward(const EdgeGeometryOp& geometry, const MessageLayer& layer,
                                  const MessageChunkInput& in, MessageChunkState& state,
                                  const at::Tensor& grad_aggregate, const at::Tensor& grad_density,
                                  at::Tensor* x_table_grad, StageTimer* timer = nullptr);

// The CSR row pointer [nrows + 1] of non-decreasing rows.
at::Tensor row_pointer(const at::Tensor& rows, int64_t nrows);

// Receiver-sorted segment sum: per row of the CSR row_ptr [nrows + 1], the sum of its edges' values.
// Deterministic (one reduction per row, in edge order).
at::Tensor segment_sum(const at::Tensor& values, const at::Tensor& row_ptr);

}  // namespace flashmace
