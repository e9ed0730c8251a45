// FastEngine::step: the forward pass layer by layer (message chunks with split projection, then node
// chunks), then the backward pass layer by layer in reverse (node chunks, then edge chunks,
// recomputed or kept), each layer's ghost exchange between them, and the forces and virials from
// the edge gradients. What the passes share lives in StepState.
#include <algorithm>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "engine/ops/edge_terms.h"
#include "engine/step/atom_sums.h"
#include "engine/step/fast_engine.h"
#include "engine/step/message_stage.h"
#include "engine/step/node_stage.h"

namespace flashmace {

namespace {

void lap(StageTimer* timer, const char* stage) {
  if (timer) timer->lap(stage);
}

at::Tensor slice(const at::Tensor& t, const EdgeChunk& ch) { return t.narrow(0, ch.begin, ch.count); }

}  // namespace

struct FastEngine::StepState {
  struct Layer {
    at::Tensor h;                          // [atoms, dim(in)] input features (t > 0)
    at::Tensor hu;                         // [atoms, dim(in)] their linear_up (t > 0)
    at::Tensor mlin;                       // [nlocal, dim(target)] projected message sums
    at::Tensor dens;                       // [nlocal] density sums (density blocks)
    at::Tensor dmlin, ddens;               // their gradients (backward_nodes)
    std::vector<MessageChunkState> edges;  // kept chunk states (no-recompute plans)
    std::vector<NodeChunkState> nodes;
  };
  // [padded edges, 3] sorted edge vectors: float64, and in the model dtype (when that is float64,
  // or the step keeps its chunks' states, or ZBL reads them: else converted per chunk, which
  // saves a copy of all edges' vectors in recompute plans)
  at::Tensor v64, v;
  at::Tensor caller_v64;                     // without v64: the caller's vectors (FastEngine::step)
  const std::vector<RadialPairs>* pairs;     // per chunk (or null)
  const SegmentedCudaGraph::Cut* cut;        // receives the halo exchanges
  const EngineRequest* want;
  bool keep = false;                         // chunk states kept from forward to backward (no recompute)
  bool beside = false;                       // later layers' radial MLPs on the side stream
  bool shared_geometry = false;              // layers 1.. read layer 0's edge geometry (forward_layer)
  std::vector<GeometryGradients> held;       // per chunk: their geometry gradients, for layer 0's backward
  at::Tensor x0_table;                       // [present, dim(in)] first-layer features per element present
  std::vector<Layer> layers;
  at::Tensor energy;                         // [nlocal] interaction energies (model dtype)
  at::Tensor h_local;                        // [nlocal, dim(out)] of the last layer run forward
  at::Tensor zbl_slope;                      // [E] dE_zbl/dr per edge
  at::Tensor grad_v;                         // [padded edges, 3] dE/dv (model dtype)
  std::vector<at::Tensor> side_grad_v;       // per chunk, summed on the side stream (beside)
  at::Tensor gh;                             // dE/d(h_local) of the layer being differentiated
  // The last layer of a recompute plan runs its backward pass block by block right after the
  // block's forward pass (fused_backward): its gradients of the input features and their linear_up.
  // fused_dh takes the input features' own memory where it can (dh_over_h): a block reads its rows
  // of them only in its node work, which is done when its rows of dh are written.
  at::Tensor fused_dh, fused_dhu;
  bool dh_over_h = false;
};

// Whether layer t's backward pass runs inside its forward pass: the last layer of a recompute plan.
// Its output features feed nothing but the energies, so a block's gradient is complete once the
// block ran forward: its chunks' and node states are used right away, neither kept for all atoms
// nor recomputed.
bool FastEngine::fused_backward(const StepState& s, int t) const {
  return s.want->any() && !s.keep && t == p_.config.num_interactions - 1;
}

// Whether all of layer t's dE/dv goes through the edge geometry's backward pass (no envelope inside
// the interaction, radial spline or NonLinear radial: message_chunk_backward_edges can hold it).
bool FastEngine::geometry_gradients_only(int t) const {
  const MessageLayer& m = message_layer(t);
  return !m.nonlinear && !m.envelope && !m.spline;
}

// Whether layer t's chunk k shares its radial MLP rows between reverse-edge pairs (where the step has
// pairs and the layer can: MessageLayer::shares_pairs).
bool FastEngine::uses_pairs(const StepState& s, std::size_t k, int t) const {
  return s.pairs && (*s.pairs)[k].index.defined() && message_layer(t).shares_pairs();
}

// A chunk's edge vectors in the model's dtype.
at::Tensor FastEngine::chunk_vectors(const StepState& s, const EdgeChunk& ch) const {
  if (s.v.defined()) return slice(s.v, ch);
  if (s.v64.defined()) return slice(s.v64, ch).to(p_.options.dtype());
  return s.caller_v64.index_select(0, slice(topology_.order, ch)).to(p_.options.dtype());
}

// The inputs of edge chunk k in layer t (x_table: per-element rows in layer 0, per node after).
MessageChunkInput FastEngine::message_input(const StepState& s, std::size_t k, int t, const at::Tensor& hu) const {
  const EdgeTopology& topo = topology_;
  const EdgeChunk& ch = topo.chunks[k];
  MessageChunkInput in;
  if (uses_pairs(s, k, t)) in.pairs = &(*s.pairs)[k];
  in.vectors = chunk_vectors(s, ch);
  if (topo.z_sender.defined()) {
    in.z_sender = slice(topo.z_sender, ch);
    in.z_receiver = slice(topo.z_receiver, ch);
  }
  in.x_table = t == 0 ? s.x0_table : hu;
  in.x_index = t == 0 ? slice(topo.sender_slot, ch) : slice(topo.sender, ch);
  in.rows = topo.chunk_rows[k];
  in.nrows = ch.nrows;
  in.row_ptr = topo.chunk_row_ptr[k];
  in.x_gradient = t > 0;
  if (t > 0 && !topo.chunk_senders.empty()) in.x_csr = &topo.chunk_senders[k];
  if (p_.layers[t].nonlinear) {
    in.species_sender = topo.present_index.index_select(0, slice(topo.sender_slot, ch));
    in.species_receiver = topo.species_local.index_select(0, slice(topo.receiver, ch));
  }
  return in;
}

NodeChunkInput FastEngine::node_input(const StepState& s, int t, std::size_t b, const at::Tensor& mlin,
                                      const at::Tensor& density) const {
  const StepState::Layer& S = s.layers[t];
  const NodeBlock& B = topology_.blocks[b];
  NodeChunkInput in;
  in.species = topology_.species_local.narrow(0, B.row0, B.nrows);
  in.groups = topology_.atom_groups[b];
  in.mlin = mlin;
  if (p_.layers[t].density_sums()) in.density = density;
  in.h_in = t == 0 ? h0_table_.index_select(0, in.species) : S.h.narrow(0, B.row0, B.nrows);
  if (p_.layers[t].nonlinear) in.hu_in = t == 0 ? hu0_table_.index_select(0, in.species) : S.hu.narrow(0, B.row0, B.nrows);
  return in;
}

// Whether block b's chunks cover its rows with one chunk (then the chunk's projection writes every
// row once: no zeros to sum into).
bool FastEngine::one_chunk_block(std::size_t b) const {
  const NodeBlock& B = topology_.blocks[b];
  if (B.nchunks != 1) return false;
  const EdgeChunk& ch = topology_.chunks[B.chunk0];
  return ch.row0 == B.row0 && ch.nrows == B.nrows;
}

// Zeroed message and density sums for block b's rows in layer t, or uninitialised message sums
// where one chunk writes them all (one_chunk_block).
std::pair<at::Tensor, at::Tensor> FastEngine::block_sum_buffers(int t, std::size_t b) const {
  const InteractionParams& L = p_.layers[t];
  const int64_t rows = topology_.blocks[b].nrows;
  const at::Tensor mlin = one_chunk_block(b) ? at::empty({rows, L.projected_dim()}, p_.options)
                                             : at::zeros({rows, L.projected_dim()}, p_.options);
  return {mlin, L.density_sums() ? at::zeros({rows}, p_.options) : at::Tensor()};
}

// Block b's message sums in layer t: its chunks forward (with the states in *states: prepared ones,
// or empty), each projected into the block's rows of mlin (split projection, DESIGN.md idea 3: the
// linear commutes with the sum over edges, so the [rows, dim(mid)] sum never exists) and its
// density sums into dens. accumulate: add to mlin (zeros) rather than write it.
void FastEngine::block_sums(const StepState& s, int t, std::size_t b, const at::Tensor& mlin, const at::Tensor& dens,
                            bool accumulate, std::vector<MessageChunkState>* states) const {
  const NodeBlock& B = topology_.blocks[b];
  for (int64_t j = 0; j < B.nchunks; ++j) {
    const std::size_t k = static_cast<std::size_t>(B.chunk0 + j);
    const EdgeChunk& ch = topology_.chunks[k];
    lap(timer_, "edges_forward");
    const MessageChunkInput in = message_input(s, k, t, s.layers[t].hu);
    const MessageChunkOutput out = message_chunk_forward(geometry_, message_layer(t), in, &(*states)[j], true, timer_);
    project_messages(t, out, in.x_table, mlin.narrow(0, ch.row0 - B.row0, ch.nrows), accumulate);
    if (p_.layers[t].density_sums()) dens.narrow(0, ch.row0 - B.row0, ch.nrows).add_(out.density);
  }
  lap(timer_, "edges_forward");
}

// A chunk's message sums projected into its rows of mlin (written, or added), or, where the first
// layer folds the projection (FirstLayerOp::fold_projection), its per-species sums projected straight.
void FastEngine::project_messages(int t, const MessageChunkOutput& out, const at::Tensor& x_table,
                                  const at::Tensor& rows, bool accumulate) const {
  if (out.sums.defined())
    message_layer(t).first->project_into(out.sums, x_table, rows, accumulate);
  else
    project_[t].forward_into(out.aggregate, rows, accumulate);
}

// What a chunk's backward pass starts from, given d(projected) of its rows: d(message sums) through
// the projection's transpose, or the rows themselves where the first layer folds the projection.
at::Tensor FastEngine::message_gradient(int t, const at::Tensor& dmlin_rows) const {
  const MessageLayer& m = message_layer(t);
  return m.first && m.first->folds_projection() ? dmlin_rows : project_[t].transpose(dmlin_rows);
}

// The radial MLPs of layers 1.. need only the edge vectors: with kept states they run on the side
// stream while layer 0 runs. Tensors that cross streams are shared with the allocator (side_stream.h).
void FastEngine::prepare_radials_beside(StepState& s) {
  const int T = p_.config.num_interactions;
  const std::size_t nchunks = topology_.chunks.size();
  for (int t = 1; t < T; ++t) s.layers[t].edges.resize(nchunks);
  side_.run([&] {
    for (int t = 1; t < T; ++t)
      for (std::size_t k = 0; k < nchunks; ++k)
        message_chunk_prepare(geometry_, message_layer(t), message_input(s, k, t, at::Tensor()), &s.layers[t].edges[k]);
  });
  for (int t = 1; t < T; ++t)
    for (const MessageChunkState& st : s.layers[t].edges) {
      const EdgeGeometry& g = st.geometry;
      for (const at::Tensor& x : {g.vectors, g.r, g.u, g.sh, g.ef, g.def_dr, st.radial, st.hidden, st.density})
        side_.share(x);
      for (const at::Tensor& x : g.y) side_.share(x);
      for (const at::Tensor& x : st.mlp_pre) side_.share(x);
      for (const at::Tensor& x : st.nonlinear.tensors()) side_.share(x);
    }
}

// ZBL's energies into s.energy and its slopes per edge into s.zbl_slope: for all edges at once, or
// chunk by chunk where the step has no vectors of all edges (the same values: ZBL is per edge).
void FastEngine::zbl_forward(StepState& s) {
  const EdgeTopology& topo = topology_;
  at::Tensor e;
  if (s.v.defined())
    std::tie(e, s.zbl_slope) = geometry_.zbl(s.v, topo.z_sender, topo.z_receiver);
  else
    s.zbl_slope = at::empty({topo.padded_edges}, p_.options);
  for (std::size_t k = 0; k < topo.chunks.size(); ++k) {
    const EdgeChunk& ch = topo.chunks[k];
    at::Tensor ek = e.defined() ? slice(e, ch) : at::Tensor();
    if (!ek.defined()) {
      at::Tensor slope;
      std::tie(ek, slope) = geometry_.zbl(chunk_vectors(s, ch), slice(topo.z_sender, ch), slice(topo.z_receiver, ch));
      slice(s.zbl_slope, ch).copy_(slope);
    }
    s.energy.narrow(0, ch.row0, ch.nrows).add_(segment_sum(ek, topo.chunk_row_ptr[k]));
  }
}

// Layer t forward: its input features (exchanged to the ghosts), then block by block the message
// chunks into the block's rows and the node work on them, writing the next features and the
// energies. The message sums of all atoms are kept for the backward pass when the step keeps its
// intermediates or the plan keeps this layer's sums; else they live for one block.
void FastEngine::forward_layer(StepState& s, int t) {
  const InteractionParams& L = p_.layers[t];
  const int64_t nlocal = topology_.nlocal;
  StepState::Layer& S = s.layers[t];
  if (t > 0) {
    if (s.beside && t == 1) side_.join();  // (before the exchange: a capture segment may end there)
    if (!halo_ && topology_.padded_atoms == nlocal) {
      S.h = s.h_local;  // (no ghost or padding rows)
    } else {
      S.h = at::zeros({topology_.padded_atoms, L.in.dim()}, p_.options);
      S.h.narrow(0, 0, nlocal).copy_(s.h_local);
    }
    lap(timer_, "nodes_forward");
    if (halo_) (*s.cut)([this, h = S.h] { exchange(h, /*forward=*/true); });
    lap(timer_, "halo_exchange");
    S.hu = up_[t].forward(S.h);
  }
  const std::vector<NodeBlock>& blocks = topology_.blocks;
  const bool fused = fused_backward(s, t);
  if (fused) {
    s.gh = at::zeros({nlocal, L.out.dim()}, p_.options);  // (no later layer reads its features)
    if (t > 0) {
      // (the features' own storage, whole: where they are a view into more, the rest may be live)
      s.dh_over_h = S.h.is_contiguous() && S.h.storage_offset() == 0 && S.h.storage().nbytes() == S.h.nbytes();
      s.fused_dh = s.dh_over_h ? S.h : at::zeros({topology_.padded_atoms, L.in.dim()}, p_.options);
      s.fused_dhu = at::zeros({topology_.padded_atoms, L.edge.dim()}, p_.options);
    }
  }
  const bool store = s.want->any() && (s.keep || plan_.kept_sums[t]) && !fused;
  if (store) {
    const bool whole = blocks.size() == 1 && one_chunk_block(0);
    S.mlin = whole ? at::empty({nlocal, L.projected_dim()}, p_.options) : at::zeros({nlocal, L.projected_dim()}, p_.options);
    if (L.density_sums()) S.dens = at::zeros({nlocal}, p_.options);
  }
  std::vector<MessageChunkState> prepared = s.beside && t > 0 ? std::move(S.edges) : std::vector<MessageChunkState>();
  // On the CPU, with kept states, later layers read layer 0's edge geometry (harmonics, radial
  // features) instead of computing it again: the same function of the same vectors, bit for bit. (On
  // a GPU their radial MLPs are prepared beside layer 0 instead, geometry included.)
  const bool share_geometry = t > 0 && s.keep && prepared.empty() && p_.options.device().is_cpu() &&
                              s.layers[0].edges.size() == topology_.chunks.size();
  S.edges.clear();
  s.h_local = blocks.size() == 1 ? at::Tensor() : at::empty({nlocal, L.out.dim()}, p_.options);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const NodeBlock& B = blocks[b];
    auto [mlin, dens] = store ? std::make_pair(S.mlin.narrow(0, B.row0, B.nrows),
                                               L.density_sums() ? S.dens.narrow(0, B.row0, B.nrows) : at::Tensor())
                              : block_sum_buffers(t, b);
    std::vector<MessageChunkState> states(static_cast<std::size_t>(B.nchunks));
    if (!prepared.empty())  // prepared on the side stream
      for (int64_t j = 0; j < B.nchunks; ++j) states[j] = std::move(prepared[B.chunk0 + j]);
    else if (share_geometry)  // the same edges in the same chunks: layer 0's edge geometry
      for (int64_t j = 0; j < B.nchunks; ++j) states[j].geometry = s.layers[0].edges[B.chunk0 + j].geometry;
    s.shared_geometry = s.shared_geometry || share_geometry;
    block_sums(s, t, b, mlin, dens, !one_chunk_block(b), &states);
    if (s.keep)
      for (MessageChunkState& st : states) S.edges.push_back(std::move(st));
    NodeChunkState state;
    const NodeChunkInput in = node_input(s, t, b, mlin, dens);
    const NodeChunkOutput out = node_chunk_forward(p_, t, node_linears_[t], sc_[t], in, &state, timer_);
    if (blocks.size() == 1)
      s.h_local = out.h;  // (one block: its features as they come)
    else
      s.h_local.narrow(0, B.row0, B.nrows).copy_(out.h);
    s.energy.narrow(0, B.row0, B.nrows).add_(out.energy);
    if (s.keep) S.nodes.push_back(std::move(state));
    if (fused) {
      lap(timer_, "nodes_forward");
      block_backward(s, t, b, in, state, &states, &s.fused_dh, &s.fused_dhu);
    }
  }
  if (s.dh_over_h) {  // (the ghost and padding rows still hold features; the owned ones are gradients)
    s.fused_dh.narrow(0, nlocal, s.fused_dh.size(0) - nlocal).zero_();
    S.h = at::Tensor();
  }
  lap(timer_, "nodes_forward");
}

// Layer t backward of a step that kept its intermediates, node stage: d(projected sums) and
// d(density) into the layer's dmlin and ddens and, for t > 0, d(input features) into *dh and
// d(up-projected features) into *dhu (NonLinear blocks), from s.gh.
void FastEngine::backward_nodes(StepState& s, int t, at::Tensor* dh, at::Tensor* dhu) {
  const InteractionParams& L = p_.layers[t];
  StepState::Layer& S = s.layers[t];
  // One block covering every row takes its gradients as they come (no copies). *dh is undefined on
  // entry and made here: the block's input-feature gradient itself where it covers every row.
  const bool whole = topology_.blocks.size() == 1;
  auto dh_rows = [&]() -> at::Tensor& {
    if (!dh->defined()) *dh = at::zeros({topology_.padded_atoms, L.in.dim()}, p_.options);
    return *dh;
  };
  if (!whole) {
    S.dmlin = at::empty_like(S.mlin);
    if (L.density_sums()) S.ddens = at::empty_like(S.dens);
  }
  for (std::size_t b = 0; b < topology_.blocks.size(); ++b) {
    const NodeBlock& B = topology_.blocks[b];
    const NodeChunkInput in = node_input(s, t, b, S.mlin.narrow(0, B.row0, B.nrows),
                                         L.density_sums() ? S.dens.narrow(0, B.row0, B.nrows) : at::Tensor());
    NodeChunkState state = std::move(S.nodes[b]);
    const NodeChunkGradients gi =
        node_chunk_backward(p_, t, node_linears_[t], sc_[t], in, state, s.gh.narrow(0, B.row0, B.nrows), timer_);
    if (whole) {
      S.dmlin = gi.mlin;
      if (L.density_sums()) S.ddens = gi.density;
    } else {
      S.dmlin.narrow(0, B.row0, B.nrows).copy_(gi.mlin);
      if (L.density_sums()) S.ddens.narrow(0, B.row0, B.nrows).copy_(gi.density);
    }
    if (t > 0 && gi.h_in.defined()) {
      if (whole && gi.h_in.size(0) == topology_.padded_atoms)
        *dh = gi.h_in;
      else
        dh_rows().narrow(0, B.row0, B.nrows).add_(gi.h_in);
    }
    if (t > 0 && gi.hu_in.defined()) dhu->narrow(0, B.row0, B.nrows).add_(gi.hu_in);
  }
  if (t > 0) dh_rows();  // (no block gave one)
  S.nodes.clear();
  lap(timer_, "nodes_backward");
}

// Layer t backward of a step that kept its intermediates, message stage: per edge chunk dE/dv into
// s.grad_v (on the side stream for t > 0 when beside) and, for t > 0, d(up-projected features) into
// *dhu, from the layer's dmlin and ddens (backward_nodes).
void FastEngine::backward_edges(StepState& s, int t, at::Tensor* dhu) {
  const InteractionParams& L = p_.layers[t];
  StepState::Layer& S = s.layers[t];
  const std::vector<EdgeChunk>& chunks = topology_.chunks;
  // Layers 1.. that read layer 0's edge geometry hold their geometry gradients for layer 0's backward
  // pass, which takes the geometry's backward once, on the sums.
  const bool merge = s.shared_geometry && geometry_gradients_only(0);
  const bool hold = merge && t > 0 && geometry_gradients_only(t), take = merge && t == 0;
  if ((hold || take) && s.held.empty()) s.held.resize(chunks.size());
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    const EdgeChunk& ch = chunks[k];
    const MessageChunkInput in = message_input(s, k, t, S.hu);
    MessageChunkState state = std::move(S.edges[k]);
    // Split projection, transposed: the chunk's rows of d(sum of messages) from d(projected).
    const at::Tensor dagg = message_gradient(t, S.dmlin.narrow(0, ch.row0, ch.nrows));
    const at::Tensor dd = L.density_sums() ? S.ddens.narrow(0, ch.row0, ch.nrows) : at::Tensor();
    lap(timer_, "edges_backward");
    const MessageEdgeGrads grads = message_chunk_backward_messages(message_layer(t), in, state, dagg, dhu, timer_);
    if (s.beside && t > 0) {
      for (const at::Tensor& x : {grads.radial, grads.hidden, grads.harmonics, dd}) side_.share(x);
      side_.run([&] {
        const at::Tensor gv = message_chunk_backward_edges(geometry_, message_layer(t), in, state, grads, dd);
        s.side_grad_v[k] = s.side_grad_v[k].defined() ? s.side_grad_v[k].add_(gv) : gv;
      });
      side_.share(s.side_grad_v[k]);
    } else {
      const at::Tensor gv = message_chunk_backward_edges(geometry_, message_layer(t), in, state, grads, dd, timer_,
                                                         hold ? &s.held[k] : nullptr, take ? &s.held[k] : nullptr);
      if (gv.defined()) s.grad_v.narrow(0, ch.begin, ch.count).add_(gv);
    }
  }
  S.edges.clear();
  lap(timer_, "edges_backward");
}

void FastEngine::backward_layer(StepState& s, int t) {
  const InteractionParams& L = p_.layers[t];
  StepState::Layer& S = s.layers[t];
  const int64_t nlocal = topology_.nlocal, atoms = topology_.padded_atoms;
  if (!s.gh.defined()) s.gh = at::zeros({nlocal, L.out.dim()}, p_.options);
  if (fused_backward(s, t)) {  // (ran with the forward pass)
    backward_layer_end(s, t, s.fused_dh, s.fused_dhu);
    s.fused_dh = s.fused_dhu = at::Tensor();
    return;
  }
  // (kept states: backward_nodes makes dh, taking the node gradients as they are where it can)
  at::Tensor dh = t > 0 && !s.keep ? at::zeros({atoms, L.in.dim()}, p_.options) : at::Tensor();
  // The zeros the conv TP backward sums dR into are cleared on the side stream meanwhile.
  const bool dR_ahead = s.beside && t > 0 && !message_layer(t).first;
  if (dR_ahead) {
    side_.run([&] {
      for (std::size_t k = 0; k < S.edges.size(); ++k)
        S.edges[k].dR_rows =
            conv_tp_dR_rows(message_layer(t).tp, S.edges[k].radial, uses_pairs(s, k, t));
    });
    for (const MessageChunkState& st : S.edges) side_.share(st.dR_rows);
  }
  at::Tensor dhu = t > 0 ? at::zeros({atoms, L.edge.dim()}, p_.options) : at::Tensor();
  if (s.keep) {
    backward_nodes(s, t, &dh, &dhu);
    if (dR_ahead) side_.join();
    backward_edges(s, t, &dhu);
  } else {
    backward_blocks(s, t, &dh, &dhu);
  }
  backward_layer_end(s, t, dh, dhu);
}

// The end of layer t's backward pass: d(input features) with linear_up's transpose, exchanged back
// to the ghosts' owners, become the previous layer's output gradient.
void FastEngine::backward_layer_end(StepState& s, int t, const at::Tensor& dh, const at::Tensor& dhu) {
  StepState::Layer& S = s.layers[t];
  S.mlin = S.dmlin = S.dens = S.ddens = at::Tensor();
  if (t > 0) {
    up_[t].transpose_into(dhu, dh, /*accumulate=*/true);
    if (halo_) add_side_grad_v(s);  // (a capture segment may end at the exchange)
    if (halo_) (*s.cut)([this, dh] { exchange(dh, /*forward=*/false); });
    lap(timer_, "halo_exchange");
    s.gh = dh.narrow(0, 0, topology_.nlocal);
  }
}

// Layer t backward of a recompute plan, block by block: the block's message sums (kept, or its
// chunks run forward again, keeping their states when there is one), its node work forward and
// backward, then its chunks backward (recomputing geometry and radial MLP where no state was kept)
// with dE/dv into s.grad_v, d(input features) into *dh and d(up-projected features) into *dhu.
void FastEngine::backward_blocks(StepState& s, int t, at::Tensor* dh, at::Tensor* dhu) {
  const InteractionParams& L = p_.layers[t];
  StepState::Layer& S = s.layers[t];
  for (std::size_t b = 0; b < topology_.blocks.size(); ++b) {
    const NodeBlock& B = topology_.blocks[b];
    at::Tensor mlin, dens;
    std::vector<MessageChunkState> states(static_cast<std::size_t>(B.nchunks));
    bool recomputed = false;
    if (plan_.kept_sums[t]) {
      mlin = S.mlin.narrow(0, B.row0, B.nrows);
      if (L.density_sums()) dens = S.dens.narrow(0, B.row0, B.nrows);
    } else {
      std::tie(mlin, dens) = block_sum_buffers(t, b);
      block_sums(s, t, b, mlin, dens, !one_chunk_block(b), &states);
      // (one chunk's state is kept for its backward pass; several would not fit the plan)
      recomputed = B.nchunks == 1;
    }
    const NodeChunkInput in = node_input(s, t, b, mlin, dens);
    NodeChunkState node_state;
    node_chunk_forward(p_, t, node_linears_[t], sc_[t], in, &node_state, timer_);
    if (!recomputed) states.clear();
    block_backward(s, t, b, in, node_state, &states, dh, dhu);
  }
}

// Block b of layer t backward from its node input and node state: its node work, then its chunks
// with dE/dv into s.grad_v, d(input features) into *dh and d(up-projected features) into *dhu.
// Chunk states: those *states holds (one per chunk of the block), else recomputed (geometry and
// radial MLP) chunk by chunk.
void FastEngine::block_backward(StepState& s, int t, std::size_t b, const NodeChunkInput& in,
                                NodeChunkState& node_state, std::vector<MessageChunkState>* states, at::Tensor* dh,
                                at::Tensor* dhu) {
  const InteractionParams& L = p_.layers[t];
  const NodeBlock& B = topology_.blocks[b];
  const NodeChunkGradients gi =
      node_chunk_backward(p_, t, node_linears_[t], sc_[t], in, node_state, s.gh.narrow(0, B.row0, B.nrows), timer_);
  if (t > 0 && dh == &s.fused_dh && s.dh_over_h) {  // (its rows held the block's input features until now)
    const at::Tensor rows = dh->narrow(0, B.row0, B.nrows);
    gi.h_in.defined() ? rows.copy_(gi.h_in) : rows.zero_();
  } else if (t > 0 && gi.h_in.defined()) {
    dh->narrow(0, B.row0, B.nrows).add_(gi.h_in);
  }
  if (t > 0 && gi.hu_in.defined()) dhu->narrow(0, B.row0, B.nrows).add_(gi.hu_in);
  lap(timer_, "nodes_backward");
  const bool kept = static_cast<int64_t>(states->size()) == B.nchunks;
  for (int64_t j = 0; j < B.nchunks; ++j) {
    const std::size_t k = static_cast<std::size_t>(B.chunk0 + j);
    const EdgeChunk& ch = topology_.chunks[k];
    const MessageChunkInput msg = message_input(s, k, t, s.layers[t].hu);
    MessageChunkState state;
    if (kept)
      state = std::move((*states)[j]);
    else
      message_chunk_forward(geometry_, message_layer(t), msg, &state, /*aggregate=*/false, timer_);
    // Split projection, transposed: the chunk's rows of d(sum of messages) from d(projected).
    const at::Tensor dagg = message_gradient(t, gi.mlin.narrow(0, ch.row0 - B.row0, ch.nrows));
    const at::Tensor dd = L.density_sums() ? gi.density.narrow(0, ch.row0 - B.row0, ch.nrows) : at::Tensor();
    lap(timer_, "edges_backward");
    s.grad_v.narrow(0, ch.begin, ch.count)
        .add_(message_chunk_backward(geometry_, message_layer(t), msg, state, dagg, dd, dhu, timer_));
  }
  lap(timer_, "edges_backward");
}

// The side stream's dE/dv, added once it is done.
void FastEngine::add_side_grad_v(StepState& s) {
  const std::vector<EdgeChunk>& chunks = topology_.chunks;
  if (!s.beside) return;
  side_.join();
  for (std::size_t k = 0; k < chunks.size(); ++k)
    if (s.side_grad_v[k].defined()) s.grad_v.narrow(0, chunks[k].begin, chunks[k].count).add_(s.side_grad_v[k]);
  s.side_grad_v.assign(chunks.size(), at::Tensor());
}

// ZBL's edge gradients, then forces and virials in float64 from the receiver-sorted edge gradients
// (atom_sums.h).
void FastEngine::finish_gradients(StepState& s, EngineResult* result) {
  add_side_grad_v(s);
  // (the sorted vectors made here, where the step's blocks are gone, if the step ran without them)
  const at::Tensor v64 = s.v64.defined() ? s.v64 : sorted_vectors(s.caller_v64);
  if (p_.zbl) {
    // dE/dv = scale * dE_zbl/dr * v / r (every receiver is owned, so every edge counts once)
    const at::Tensor v = s.v.defined() ? s.v : v64.to(p_.options.dtype());
    const at::Tensor r = at::linalg_vector_norm(v, 2, {1}, true);
    s.grad_v.add_(p_.config.scale.front() * s.zbl_slope.unsqueeze(1) * v / r);
  }
  AtomSumsRequest sums;
  sums.forces = s.want->forces;
  sums.virial = s.want->virial;
  sums.atom_virial = s.want->atom_virial;
  AtomSums r = atom_sums(topology_, s.grad_v, v64, sums);
  result->forces = r.forces;
  result->virial = r.virial;
  result->atom_virial = r.atom_virial;
}

void FastEngine::step(const at::Tensor& v64, const std::vector<RadialPairs>* pairs, const EngineRequest& want,
                      const SegmentedCudaGraph::Cut& cut, EngineResult* result, const at::Tensor& caller_v64) {
  const MaceConfig& c = p_.config;
  const int T = c.num_interactions;
  if (!topology_.blocks_own_chunks())
    throw Error("fast engine: node blocks that do not own their edge chunks (an edge topology built without row_aligned for several blocks)");
  StepState s;
  s.v64 = v64;
  s.caller_v64 = caller_v64;
  s.keep = want.any() && !plan_.recompute;
  if (!v64.defined() && (s.keep || topology_.padded_edges != topology_.edges || !caller_v64.defined()))
    throw Error("fast engine: a step on the caller's vectors needs an unpadded recompute plan");
  if (v64.defined() && (p_.options.dtype() == at::kDouble || s.keep || p_.zbl)) s.v = v64.to(p_.options);
  s.pairs = pairs;
  s.cut = &cut;
  s.want = &want;
  s.beside = side_.active() && s.keep && T > 1 && !timer_;
  s.x0_table = hu0_table_.index_select(0, topology_.present_index);
  s.layers.resize(T);
  s.energy = at::zeros({topology_.nlocal}, p_.options);
  if (s.beside) prepare_radials_beside(s);

  if (p_.zbl) zbl_forward(s);
  if (want.any()) {
    s.grad_v = at::zeros({topology_.padded_edges, 3}, p_.options);
    s.side_grad_v.resize(topology_.chunks.size());
  }
  for (int t = 0; t < T; ++t) forward_layer(s, t);
  result->node_energy =
      (c.scale.front() * s.energy + c.shift.front()).to(at::kDouble) +
      p_.atomic_energies_f64.index_select(0, topology_.species_local);
  if (!want.any()) return;
  for (int t = T - 1; t >= 0; --t) backward_layer(s, t);
  finish_gradients(s, result);
}

}  // namespace flashmace
