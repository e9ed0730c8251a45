#include "engine/fast_engine.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/first_layer.h"
#include "engine/message_stage.h"
#include "engine/node_stage.h"
#include "engine/radial_pairs.h"
#include "model/e3nn_ops.h"
#include "sc/sc_descriptor.h"

namespace flashmace {

namespace {

void lap(StageTimer* timer, const char* stage) {
  if (timer) timer->lap(stage);
}

// The halo exchange on the calling thread. The exchanger works on host float64 rows, so the rows are
// staged through the host.
void exchange(at::Tensor& rows, HaloExchanger* halo, bool forward) {
  if (!halo) return;
  at::Tensor host = rows.to(at::kCPU, at::kDouble, /*non_blocking=*/false, /*copy=*/true).contiguous();
  const int ncols = static_cast<int>(rows.size(1));
  if (forward)
    halo->forward(host.data_ptr<double>(), ncols);
  else
    halo->reverse(host.data_ptr<double>(), ncols);
  rows.copy_(host);
}

// One chunk of edges [begin, begin + count) in receiver order, with the receiver rows it touches.
struct EdgeChunk {
  int64_t begin = 0, count = 0;
  int64_t row0 = 0, nrows = 0;
};

std::vector<EdgeChunk> edge_chunks(const at::Tensor& receiver_sorted, int64_t chunk) {
  const int64_t E = receiver_sorted.size(0);
  std::vector<EdgeChunk> chunks;
  if (E == 0) return chunks;
  const at::Tensor first = at::arange(0, E, chunk, receiver_sorted.options());
  const at::Tensor last = at::clamp_max(first + (chunk - 1), E - 1);
  // One small device->host copy per step: the receiver rows at the chunk boundaries.
  const at::Tensor rows = at::stack({receiver_sorted.index_select(0, first), receiver_sorted.index_select(0, last)})
                              .to(at::kCPU)
                              .contiguous();
  const int64_t n = first.size(0);
  const int64_t* r = rows.data_ptr<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    EdgeChunk c;
    c.begin = k * chunk;
    c.count = std::min(chunk, E - c.begin);
    c.row0 = r[k];
    c.nrows = r[n + k] - r[k] + 1;
    chunks.push_back(c);
  }
  return chunks;
}

}  // namespace

FastEngine::FastEngine(const ModelFile& file, MaceParams params, EngineSettings settings)
    : p_(std::move(params)), settings_(std::move(settings)), geometry_(p_) {
  const MaceConfig& c = p_.config;
  const int Z = c.num_elements();
  const InteractionParams& L0 = p_.layers[0];
  h0_table_ = p_.node_embedding / std::sqrt(static_cast<double>(Z));
  hu0_table_ = e3nn_linear(h0_table_, L0.linear_up, L0.in, L0.in);
  if (settings_.radial_pairs != "auto" && settings_.radial_pairs != "on" && settings_.radial_pairs != "off")
    throw Error("Unknown radial_pairs setting '" + settings_.radial_pairs + "' (use auto, on or off)");
  if (settings_.tf32 && (!p_.options.device().is_cuda() || p_.options.dtype() != at::kFloat))
    throw Error(
        "tf32 needs dtype float32 on a CUDA device (it lets the radial-MLP GEMMs use TF32 tensor cores); "
        "this evaluator is " +
        std::string(p_.options.dtype() == at::kFloat ? "float32" : "float64") + " on " + p_.options.device().str());
  for (std::size_t t = 0; t < p_.layers.size(); ++t) {
    const InteractionParams& L = p_.layers[t];
    ConvTPDescriptor d = ConvTPDescriptor::build(L.in, p_.sh, L.tp);
    // The first layer's features depend only on the species: reassociated (first_layer.h).
    const bool reassociate = settings_.reassociate && t == 0 && FirstLayerOp::applies(d);
    messages_.emplace_back(L, ConvTPOp(d, p_.options), settings_.tf32, reassociate);
  }
  for (int t = 0; t < c.num_interactions; ++t) sc_.emplace_back(build_sc_descriptor(file, t), p_.options, settings_.sc);

  // Memory estimates from the shapes (element size x live values; on the H200 runs of
  // bench/RESULTS.md they come out ~20 % above the measured peaks).
  const double s = static_cast<double>(at::elementSize(p_.options.dtype().toScalarType()));
  for (std::size_t t = 0; t < p_.layers.size(); ++t) {
    const InteractionParams& L = p_.layers[t];
    double hidden = 0;
    for (std::size_t k = 0; k + 1 < L.radial_layers.size(); ++k)
      hidden += static_cast<double>(L.radial_layers[k].size(1));
    // A reassociated layer keeps the last hidden activation instead of R and has no x-gradient.
    const bool first = messages_[t].first.has_value();
    const double last = static_cast<double>(L.radial_layers.back().size(0));
    const double mid = L.tp.mid.dim(), W = first ? last : L.tp.weight_numel, in = first ? 0.0 : L.in.dim();
    const double sh = p_.sh.dim(), nb = static_cast<double>(p_.bessel_weights.size(0));
    // Kept per edge: the geometry (the fused kernels keep vectors, harmonics and radial features;
    // the ATen code also lengths, unit vectors, per-l harmonics and slopes), the MLP's hidden
    // pre-activations and its output R. In flight in the backward pass: dR, the MLP's gradients,
    // dY, dE/dv, the message sums of the chunk's rows (about one row per 8 edges in sparse graphs)
    // and the generated TP kernels' scratch (per-edge x-gradients, per-warp partial dY).
    const double geometry = geometry_.fused() ? sh + nb + 3 : 2 * sh + 2 * nb + 4;
    const double kept = W + hidden + geometry;
    costs_.kept_per_edge += s * kept;
    costs_.recomputed_per_edge = std::max(costs_.recomputed_per_edge, s * kept);
    costs_.transient_per_edge =
        std::max(costs_.transient_per_edge, s * (W + 2 * hidden + nb + 5 * sh + in + 11 + mid / 8));
    // Per atom in the node stage: kept, the normalised message, the SC input and the features; in
    // flight, their copies and gradients and the SC output (the SC executors keep no intermediates).
    const double target = L.target.dim(), out = L.out.dim();
    double sc_out = 0;
    for (const auto& b : L.out.blocks()) sc_out += static_cast<double>(c.channels()) * b.ir.dim();
    costs_.kept_per_atom += s * (2 * target + out + 16);
    costs_.transient_per_atom = std::max(costs_.transient_per_atom, s * (6 * target + 3 * sc_out + 4 * out + 2 * in));
    costs_.resident_per_atom += s * (3 * in + 2 * target + 2);
  }
  costs_.resident_per_atom += 8 * 8;  // float64 energies and bookkeeping
}

void FastEngine::update_plan(int64_t atoms, int64_t edges) {
  if (atoms == planned_atoms_ && edges == planned_edges_) return;
  const std::string device = p_.options.device().str();
  const double budget = settings_.memory_bytes > 0 ? settings_.memory_bytes : default_memory_budget(device);
  const MemoryPlan plan = plan_memory(costs_, atoms, edges, budget, settings_.edge_chunk, settings_.atom_chunk);
  // Printed when the mode or the chunk sizes change, not at every new atom or edge count (LAMMPS
  // changes them at every neighbour-list rebuild); whole-step plans differ only in their sizes.
  const bool changed = planned_atoms_ < 0 || plan.recompute != plan_.recompute ||
                       (plan.recompute && (plan.edge_chunk != plan_.edge_chunk || plan.atom_chunk != plan_.atom_chunk));
  plan_ = plan;
  planned_atoms_ = atoms;
  planned_edges_ = edges;
  if (changed && settings_.log) settings_.log(plan_.describe(atoms, edges));
}

EngineResult FastEngine::run(const GraphTensors& g, const at::Tensor& vectors64, int64_t nlocal, HaloExchanger* halo,
                             bool want_grad) {
  const at::NoGradGuard no_grad;  // every gradient below is written out; no autograd tape
  const MaceConfig& c = p_.config;
  const int T = c.num_interactions;
  const int64_t ntotal = g.species.size(0);
  const int64_t E = g.sender.size(0);
  update_plan(ntotal, E);
  const bool keep = want_grad && !plan_.recompute;
  if (timer_) timer_->start();

  // Edges in receiver order (stable, so equal receivers keep the caller's order).
  const auto sorted = at::sort(g.receiver, /*stable=*/true, 0, false);
  const at::Tensor receiver = std::get<0>(sorted), order = std::get<1>(sorted);
  const at::Tensor sender = g.sender.index_select(0, order);
  const at::Tensor vectors64_sorted = vectors64.index_select(0, order);
  const at::Tensor v = vectors64_sorted.to(p_.options);
  const at::Tensor z_node = p_.atomic_numbers.index_select(0, g.species);
  const at::Tensor z_sender = z_node.index_select(0, sender), z_receiver = z_node.index_select(0, receiver);
  // Layer 0 indexes its x table by sender species slot: rows of hu0_table_ for the species present.
  const std::vector<int64_t> present_all = ntotal > 0 ? elements_present(g.species) : std::vector<int64_t>{};
  const at::Tensor present_index =
      at::tensor(present_all.empty() ? std::vector<int64_t>{0} : present_all, at::kLong).to(g.species.device());
  const at::Tensor slot_of = at::zeros({c.num_elements()}, g.species.options())
                                 .index_put_({present_index}, at::arange(present_index.size(0), g.species.options()));
  const at::Tensor sender_slot = slot_of.index_select(0, g.species.index_select(0, sender));
  const at::Tensor x0_table = hu0_table_.index_select(0, present_index);
  const at::Tensor species_local = g.species.narrow(0, 0, nlocal);
  const std::vector<EdgeChunk> chunks = edge_chunks(receiver, plan_.edge_chunk);
  // (the local atoms' elements are among all atoms' ones; groups of absent elements come out empty)
  const std::vector<int64_t> present = nlocal > 0 ? present_all : std::vector<int64_t>{};
  const int64_t achunk = plan_.atom_chunk;
  // Reverse-edge pairs per chunk, shared by both layers and the backward pass (and by later calls
  // while the graph stays the same).
  std::vector<RadialPairCache::Chunk> pair_chunks;
  for (const EdgeChunk& ch : chunks)
    pair_chunks.push_back({ch.begin, ch.count,
                           settings_.radial_pairs == "on" ||
                               (settings_.radial_pairs == "auto" && (v.is_cpu() || ch.count >= kMinPairedChunkEdges))});
  const std::vector<RadialPairs>& pairs =
      pair_cache_.pairs(sender, receiver, vectors64_sorted, pair_chunks, p_.options.dtype().toScalarType());
  lap(timer_, "graph");

  auto slice = [](const at::Tensor& t, const EdgeChunk& ch) { return t.narrow(0, ch.begin, ch.count); };
  // The inputs of edge chunk ch in layer t (x_table: per-species rows in layer 0, per node after).
  auto message_input = [&](std::size_t k, int t, const at::Tensor& hu) {
    const EdgeChunk& ch = chunks[k];
    MessageChunkInput in;
    if (pairs[k].index.defined()) in.pairs = &pairs[k];
    in.vectors = slice(v, ch);
    in.z_sender = slice(z_sender, ch);
    in.z_receiver = slice(z_receiver, ch);
    in.x_table = t == 0 ? x0_table : hu;
    in.x_index = t == 0 ? slice(sender_slot, ch) : slice(sender, ch);
    in.rows = slice(receiver, ch) - ch.row0;
    in.nrows = ch.nrows;
    in.row_ptr = row_pointer(in.rows, ch.nrows);
    in.x_gradient = t > 0;
    return in;
  };
  auto node_input = [&](int t, const at::Tensor& mlin, const at::Tensor& dens, const at::Tensor& h, int64_t a0,
                        int64_t na) {
    NodeChunkInput in;
    in.species = species_local.narrow(0, a0, na);
    in.groups = group_species(in.species, present);
    in.mlin = mlin.narrow(0, a0, na);
    if (p_.layers[t].density) in.density = dens.narrow(0, a0, na);
    in.h_in = t == 0 ? h0_table_.index_select(0, in.species) : h.narrow(0, a0, na);
    return in;
  };

  struct LayerState {
    at::Tensor h;                          // [ntotal, dim(in)] input features (t > 0)
    at::Tensor hu;                         // [ntotal, dim(in)] their linear_up (t > 0)
    at::Tensor mlin;                       // [nlocal, dim(target)] projected message sums
    at::Tensor dens;                       // [nlocal] density sums (density blocks)
    std::vector<MessageChunkState> edges;  // kept chunk states (no-recompute plans)
    std::vector<NodeChunkState> nodes;
  };
  std::vector<LayerState> layers(T);
  at::Tensor energy = at::zeros({nlocal}, p_.options);

  // ---- forward -------------------------------------------------------------------------------
  at::Tensor zbl_slope;  // [E] dE_zbl/dr per edge
  if (p_.zbl) {
    const at::Tensor r = at::linalg_vector_norm(v, 2, {1}, true);
    auto [e, slope] = zbl_energy_and_derivative(r, z_sender, z_receiver, p_.zbl_params);
    for (const EdgeChunk& ch : chunks)
      energy.narrow(0, ch.row0, ch.nrows).add_(segment_sum(slice(e, ch), slice(receiver, ch) - ch.row0, ch.nrows));
    zbl_slope = slope;
  }
  at::Tensor h_local;  // [nlocal, dim(out)] of the previous layer
  for (int t = 0; t < T; ++t) {
    const InteractionParams& L = p_.layers[t];
    LayerState& S = layers[t];
    if (t > 0) {
      S.h = at::zeros({ntotal, L.in.dim()}, p_.options);
      S.h.narrow(0, 0, nlocal).copy_(h_local);
      lap(timer_, "nodes_forward");
      exchange(S.h, halo, /*forward=*/true);
      lap(timer_, "halo_exchange");
      S.hu = e3nn_linear(S.h, L.linear_up, L.in, L.in);
    }
    S.mlin = at::zeros({nlocal, L.target.dim()}, p_.options);
    if (L.density) S.dens = at::zeros({nlocal}, p_.options);
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      const EdgeChunk& ch = chunks[k];
      MessageChunkState state;
      lap(timer_, "edges_forward");
      const MessageChunkOutput out =
          message_chunk_forward(geometry_, messages_[t], message_input(k, t, S.hu), &state, true, timer_);
      // Split projection (DESIGN.md idea 3): the linear commutes with the sum over edges, so each
      // chunk's partial sums are projected right away and the [nlocal, dim(mid)] sum never exists.
      S.mlin.narrow(0, ch.row0, ch.nrows).add_(e3nn_linear(out.aggregate, L.linear, L.tp.mid, L.target));
      if (L.density) S.dens.narrow(0, ch.row0, ch.nrows).add_(out.density);
      if (keep) S.edges.push_back(std::move(state));
    }
    lap(timer_, "edges_forward");
    h_local = at::empty({nlocal, L.out.dim()}, p_.options);
    for (int64_t a0 = 0; a0 < nlocal; a0 += achunk) {
      const int64_t na = std::min(achunk, nlocal - a0);
      NodeChunkState state;
      const NodeChunkOutput out =
          node_chunk_forward(p_, t, sc_[t], node_input(t, S.mlin, S.dens, S.h, a0, na), &state, timer_);
      h_local.narrow(0, a0, na).copy_(out.h);
      energy.narrow(0, a0, na).add_(out.energy);
      if (keep) S.nodes.push_back(std::move(state));
    }
    lap(timer_, "nodes_forward");
  }

  EngineResult result;
  result.node_energy =
      (c.scale * energy + c.shift).to(at::kDouble) + p_.atomic_energies_f64.index_select(0, species_local);
  if (!want_grad) return result;

  // ---- backward: layers in reverse, chunks recomputed (or kept), exchanges on this thread ----
  at::Tensor grad_v = at::zeros_like(v);
  at::Tensor gh;  // dE/d(h_local) of layer t, [nlocal, dim(out_t)]
  for (int t = T - 1; t >= 0; --t) {
    const InteractionParams& L = p_.layers[t];
    LayerState& S = layers[t];
    if (!gh.defined()) gh = at::zeros({nlocal, L.out.dim()}, p_.options);
    at::Tensor dmlin = at::empty_like(S.mlin);
    at::Tensor ddens = L.density ? at::empty_like(S.dens) : at::Tensor();
    at::Tensor dh = t > 0 ? at::zeros({ntotal, L.in.dim()}, p_.options) : at::Tensor();
    for (int64_t a0 = 0, k = 0; a0 < nlocal; a0 += achunk, ++k) {
      const int64_t na = std::min(achunk, nlocal - a0);
      const NodeChunkInput in = node_input(t, S.mlin, S.dens, S.h, a0, na);
      NodeChunkState state;
      if (keep)
        state = std::move(S.nodes[k]);
      else
        node_chunk_forward(p_, t, sc_[t], in, &state, timer_);
      const NodeChunkGradients gi =
          node_chunk_backward(p_, t, sc_[t], in, state, gh.narrow(0, a0, na), c.scale, timer_);
      dmlin.narrow(0, a0, na).copy_(gi.mlin);
      if (L.density) ddens.narrow(0, a0, na).copy_(gi.density);
      if (t > 0 && gi.h_in.defined()) dh.narrow(0, a0, na).add_(gi.h_in);
    }
    S.nodes.clear();
    lap(timer_, "nodes_backward");

    at::Tensor dhu = t > 0 ? at::zeros({ntotal, L.in.dim()}, p_.options) : at::Tensor();
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      const EdgeChunk& ch = chunks[k];
      const MessageChunkInput in = message_input(k, t, S.hu);
      MessageChunkState state;
      if (keep)
        state = std::move(S.edges[k]);
      else
        message_chunk_forward(geometry_, messages_[t], in, &state, /*aggregate=*/false, timer_);
      // Split projection, transposed: the chunk's rows of d(sum of messages) from d(projected).
      const at::Tensor dagg = e3nn_linear_transpose(dmlin.narrow(0, ch.row0, ch.nrows), L.linear, L.tp.mid, L.target);
      const at::Tensor dd = L.density ? ddens.narrow(0, ch.row0, ch.nrows) : at::Tensor();
      lap(timer_, "edges_backward");
      grad_v.narrow(0, ch.begin, ch.count)
          .add_(message_chunk_backward(geometry_, messages_[t], in, state, dagg, dd, &dhu, timer_));
    }
    S.edges.clear();
    lap(timer_, "edges_backward");

    if (t > 0) {
      dh.add_(e3nn_linear_transpose(dhu, L.linear_up, L.in, L.in));
      exchange(dh, halo, /*forward=*/false);
      lap(timer_, "halo_exchange");
      gh = dh.narrow(0, 0, nlocal);
    }
  }
  if (p_.zbl) {
    // dE/dv = scale * dE_zbl/dr * v / r (every receiver is owned, so every edge counts once)
    const at::Tensor r = at::linalg_vector_norm(v, 2, {1}, true);
    grad_v.add_(c.scale * zbl_slope.unsqueeze(1) * v / r);
  }
  result.grad = at::zeros({E, 3}, vectors64.options()).index_copy_(0, order, grad_v.to(at::kDouble));
  return result;
}

}  // namespace flashmace
