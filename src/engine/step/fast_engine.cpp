#include "engine/step/fast_engine.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/host_transfers.h"
#include "engine/kernels/conv_tp_codegen.h"
#include "engine/ops/first_layer.h"
#include "engine/ops/radial_pairs.h"
#include "engine/step/message_stage.h"
#include "engine/step/node_stage.h"
#include "model/device.h"
#include "model/e3nn_ops.h"
#include "sc/sc_descriptor.h"

namespace flashmace {

namespace {

// Layer t's conv TP op. Later layers of an engine whose node features are in ir_mul read linear_up's
// output and write their message sums in ir_mul too, where the generated CUDA kernels take the layer
// (conv_tp_codegen.h) and linear_up can write that layout (no adjacent output blocks of one irrep):
// no transposing copies around the conv TP. (Layer 0's inputs are the elements' scalars.)
ConvTPOp conv_tp_op(const InteractionParams& L, const Irreps& sh, const at::TensorOptions& options, int t,
                    bool ir_mul) {
  const ConvTPDescriptor d = ConvTPDescriptor::build(L.edge, sh, L.tp);
  if (ir_mul && t > 0 && !ir_mul_runs_span_blocks(L.edge) && options.device().is_cuda() &&
      conv_tp_specialization_unsupported(d).empty()) {
    ConvTPOp op(ConvTPDescriptor::build(L.edge, sh, L.tp, /*ir_mul=*/true), options);
    if (op.specialized()) return op;  // (else NVRTC failed, logged once: the table-driven kernels read mul_ir)
  }
  return ConvTPOp(d, options);
}

}  // namespace

FastEngine::FastEngine(const ModelFile& file, MaceParams params, EngineOptions options)
    : p_(std::move(params)),
      options_(std::move(options)),
      geometry_(p_),
      side_(options_.side_stream ? p_.options.device() : c10::Device(c10::kCPU)) {
  const MaceConfig& c = p_.config;
  const int Z = c.num_elements();
  const InteractionParams& L0 = p_.layers[0];
  h0_table_ = p_.node_embedding / std::sqrt(static_cast<double>(Z));
  hu0_table_ = e3nn_linear(h0_table_, L0.linear_up, L0.in, L0.edge);
  // With radial spline the tables replace the radial MLPs: no output layer to run on tensor cores.
  const Choice tf32 = options_.radial == RadialMode::Spline ? Choice::Off : options_.tf32;
  // Node features, projected message sums and their gradients in ir_mul (irreps_linear.h): every
  // node linear, the symmetric contraction's input and the first layer's folded projection read and
  // write their blocks without transposing copies, and on the generated CUDA conv TP kernels also
  // linear_up's output and the message sums (conv_tp_op above). NonLinear blocks keep mul_ir
  // throughout.
  const bool ir_mul =
      std::none_of(p_.layers.begin(), p_.layers.end(), [](const InteractionParams& L) { return L.nonlinear; });
  for (std::size_t t = 0; t < p_.layers.size(); ++t) {
    const InteractionParams& L = p_.layers[t];
    ConvTPDescriptor d = ConvTPDescriptor::build(L.edge, p_.sh, L.tp);
    // The first layer's features depend only on the species: reassociated (first_layer.h), and with
    // reassociate auto also kept per edge, for structures of many elements (choose_first_layer).
    // (Not NonLinear blocks, whose radial MLPs read the receiver's element too, nor models that
    // apply the envelope inside the interactions.)
    const bool plain_radial = !L.nonlinear && c.apply_cutoff;
    const bool reassociate =
        options_.reassociate != Choice::Off && t == 0 && plain_radial && FirstLayerOp::applies(d);
    messages_.emplace_back(L, conv_tp_op(L, p_.sh, p_.options, static_cast<int>(t), ir_mul), tf32, reassociate,
                           options_.tf32_split_min_rows);
    MessageLayer& m = messages_.back();
    if (L.nonlinear) {
      m.nonlinear.emplace(p_, L);
    } else if (!c.apply_cutoff) {
      m.envelope = InteractionEnvelope{p_.r_max, p_.cutoff_p};
      m.output.reset();  // (the split-TF32 output layer writes R without the envelope)
    }
    if (m.shares_pairs()) some_layer_pairs_ = true;
    if (reassociate && options_.reassociate == Choice::Auto)
      per_edge_first_.emplace(L, messages_.back().tp, tf32, false, options_.tf32_split_min_rows);
    // (auto says its choice per structure: choose_first_layer)
    if (t == 0 && options_.reassociate != Choice::Auto && options_.log)
      options_.log(std::string("first interaction: ") + (reassociate ? "per sender element" : "per edge") +
                   (options_.reassociate == Choice::On ? " (reassociate on)" : " (reassociate off)"));
  }
  if (options_.radial == RadialMode::Spline) {
    for (int t = 0; t < c.num_interactions; ++t)
      if (p_.layers[t].nonlinear)
        throw Error("radial spline: the radial MLPs of this model's " + c.interaction_class(t) +
                    " read the edge's elements, which a table over the distance cannot hold; use radial mlp");
    if (!c.apply_cutoff)
      throw Error("radial spline: this model applies the envelope inside its interactions (apply_cutoff false), "
                  "which the spline tables do not; use radial mlp");
    build_radial_splines(file);
  } else if (options_.log) {
    std::string split;
    for (std::size_t t = 0; t < messages_.size(); ++t)
      if (messages_[t].output) split += (split.empty() ? "" : ", ") + std::to_string(t);
    if (!split.empty())
      options_.log("tf32 auto: the radial MLP's output layer on tensor cores in split TF32 (float32's accuracy) in "
                   "chunks of " + std::to_string(options_.tf32_split_min_rows) + " radial rows or more, layer " + split);
  }
  const IrrepsLayout features = ir_mul ? IrrepsLayout::IrMul : IrrepsLayout::MulIr;
  for (int t = 0; t < c.num_interactions; ++t) {
    const InteractionParams& L = p_.layers[t];
    ScDescriptor sc = build_sc_descriptor(file, t);
    sc.input_ir_mul = ir_mul;
    sc_.emplace_back(sc, p_.options, options_.sc);
    up_.emplace_back(L.linear_up, L.in, L.edge);
    const IrrepsLayout messages = messages_[t].tp.descriptor().ir_mul ? IrrepsLayout::IrMul : IrrepsLayout::MulIr;
    up_.back().set_layouts(features, messages);
    // Without a density block the message sums are divided by avg_num_neighbors (mace_spec.md 6.4):
    // folded into the projection's weights, one elementwise pass each way fewer (node_stage.h).
    // NonLinear blocks project onto the gate's input (linear_1) and normalise by their density.
    if (L.nonlinear)
      project_.emplace_back(L.linear, L.tp.mid, L.gate);
    else
      project_.emplace_back(L.density ? L.linear : L.linear / L.avg_num_neighbors, L.tp.mid, L.target);
    project_.back().set_layouts(messages, features);
    if (messages_[t].first) messages_[t].first->fold_projection(project_[t]);
    node_linears_.emplace_back(p_, t, features);
  }
  estimate_costs();
}

// Memory estimates from the shapes (element size x live values; on the H200 runs of bench/RESULTS.md
// they come out ~20 % above the measured peaks).
void FastEngine::estimate_costs() {
  const MaceConfig& c = p_.config;
  const double s = static_cast<double>(at::elementSize(p_.options.dtype().toScalarType()));
  const bool cpu = p_.options.device().is_cpu();
  for (std::size_t t = 0; t < p_.layers.size(); ++t) {
    const InteractionParams& L = p_.layers[t];
    double hidden = 0;
    for (std::size_t k = 0; k + 1 < L.radial_layers.size(); ++k)
      hidden += static_cast<double>(L.radial_layers[k].size(1));
    // NonLinear blocks: two MLPs, each hidden layer's LayerNorm input and its two statistics.
    for (const NormedMLP* mlp : {&L.radial_net, &L.density_net})
      for (std::size_t k = 0; k + 1 < mlp->weight.size(); ++k) hidden += static_cast<double>(mlp->weight[k].size(0)) + 2;
    // A reassociated layer keeps the last hidden activation instead of R and has no x-gradient
    // (with reassociate auto the larger per-edge layer is planned for).
    const bool first = messages_[t].first.has_value() && !(t == 0 && per_edge_first_);
    const double last = first ? static_cast<double>(L.radial_layers.back().size(0)) : 0.0;
    // (the CPU kernels sum x-gradients straight into sender rows: no per-edge scratch there)
    const double mid = L.tp.mid.dim(), W = first ? last : L.tp.weight_numel,
                 in = first || cpu ? 0.0 : L.edge.dim();
    const double sh = p_.sh.dim(), nb = static_cast<double>(p_.bessel_weights.size(0));
    // Kept per edge: the geometry (the fused kernels keep vectors, harmonics and radial features;
    // the ATen code also lengths, unit vectors, per-l harmonics and slopes), the MLP's hidden
    // pre-activations and its output R. In flight in the backward pass: dR (one row per edge covers a
    // row per reverse-edge pair and, on the CPU, the rows where an edge's dR waits for its pair's
    // edge in another thread's part, at most one per pair: conv_tp_cpu.cpp), the MLP's gradients,
    // dY, dE/dv, the message sums of the chunk's rows (about one row per 8 edges in sparse graphs)
    // and the generated TP kernels' scratch (per-edge x-gradients, per-warp partial dY).
    const double geometry = geometry_.fused() ? sh + nb + 3 : 2 * sh + 2 * nb + 4;
    const double kept = W + hidden + geometry, rest = nb + 5 * sh + in + 11 + mid / 8;
    costs_.kept_per_edge += s * kept;
    costs_.recomputed_per_edge = std::max(costs_.recomputed_per_edge, s * kept);
    costs_.transient_per_edge = std::max(costs_.transient_per_edge, s * (W + 2 * hidden + rest));
    // On the CPU, a whole-step chunk of a symmetric list pairs every edge: R, the MLP's rows and their
    // gradients once per pair (dR keeps a row per edge: one per pair and at most one waiting row per
    // pair split between threads). The CPU step holds (MP-0-medium float32, 864 atoms) 512 MiB;
    // per edge this predicts 1,391 MiB, paired 923 MiB. On a GPU the per-edge figures stay.
    if (cpu) {
      const double rows = messages_[t].shares_pairs() ? 0.5 : 1.0;
      costs_.paired_kept_per_edge += s * (rows * (W + hidden) + geometry);
      costs_.paired_transient_per_edge =
          std::max(costs_.paired_transient_per_edge, s * (W + rows * 2 * hidden + rest));
    }
    // Per atom in the node stage: kept, the normalised message, the SC input and the features; in
    // flight, their copies and gradients and the SC output (the SC executors keep no intermediates).
    const double target = L.projected_dim(), out = L.out.dim();
    double sc_out = 0;
    for (const auto& b : L.out.blocks()) sc_out += static_cast<double>(c.channels()) * b.ir.dim();
    costs_.kept_per_atom += s * (2 * target + out + 16);
    costs_.transient_per_atom = std::max(costs_.transient_per_atom, s * (6 * target + 3 * sc_out + 4 * out + 2 * in));
    // The input features (dh over them in a fused pass: layer_passes.cpp), linear_up and its gradient.
    costs_.resident_per_atom += s * 3 * in;
    costs_.sums_per_atom.push_back(s * (target + 1));  // message sums and density sums
    if (L.nonlinear) costs_.resident_per_atom += s * 2 * L.edge.dim();  // linear_res reads hu, and its gradient
  }
  costs_.last_layer_fused = true;  // (layer_passes.cpp: fused_backward)
  costs_.resident_per_atom += 8 * 8 + 2 * 8;  // float64 energies and bookkeeping, the atom order and its inverse
  // Per edge for the whole step: the edge topology (edge_topology.h: order, sorted senders, receivers,
  // their element slots, chunk rows, sender CSR, the per-atom sums' sender order, atomic numbers where
  // edge_elements(): 7 or 9 int64; a padded one also keeps the caller's senders and receivers, but
  // pads only small steps, replayed as CUDA graphs), dE/dv (model dtype, then float64 in the
  // caller's order), the chunks' radial pairs (each edge's row and share, each row's one or two edges).
  // (The sorted float64 vectors: update_plan.)
  costs_.resident_per_edge = 8.0 * (edge_elements() ? 9 : 7) + 3 * (s + 8.0) + (some_layer_pairs_ ? 3 * 8.0 + s : 0.0);
  // The sender CSR's row pointer: over all atoms with one chunk; with several, each chunk's over the
  // senders it uses, with their indices (two int64 per sender, counted as one sender per 8 edges: a
  // chunk of whole rows at tens of edges per atom uses far fewer).
  if (p_.config.num_interactions > 1) {
    costs_.resident_per_atom += 8.0;
    costs_.resident_per_edge += 2 * 8.0 / 8;
  }
}

void FastEngine::build_radial_splines(const ModelFile& file) {
  // The tables come from the model in float64 whatever the run's dtype (radial_spline.h).
  const MaceParams model64 = MaceParams::load(file, at::kDouble, at::kCPU);
  const bool f32 = p_.options.dtype().toScalarType() == at::kFloat;
  const double tolerance = f32 ? kRadialSplineTolerance32 : kRadialSplineTolerance64;
  std::vector<std::pair<std::size_t, MessageLayer*>> layers;
  for (std::size_t t = 0; t < messages_.size(); ++t) layers.emplace_back(t, &messages_[t]);
  if (per_edge_first_) layers.emplace_back(0, &*per_edge_first_);
  for (const auto& [t, layer] : layers) {
    MessageLayer& m = *layer;
    const bool hidden_only = m.first.has_value();
    m.spline.emplace(model64, fold_radial_mlp(model64.layers[t].radial_layers), hidden_only, options_.radial_intervals,
                     tolerance, p_.options);
    const RadialSplineAccuracy& a = m.spline->accuracy();
    const std::string name = "layer " + std::to_string(t) + (per_edge_first_ && layer == &*per_edge_first_ ? " per edge" : "");
    char line[400];
    std::snprintf(line, sizeof(line),
                  "radial spline: %s, %lld %s on [0, %g] A (%.3g MB): max error %.2g of max |R| (values), "
                  "%.2g of max |dR/dr| (slopes)",
                  name.c_str(), static_cast<long long>(a.intervals),
                  hidden_only ? "intervals of its hidden layer" : "intervals",
                  p_.config.r_max, m.spline->table_bytes() / 1e6, a.value_error / a.value_scale,
                  a.slope_error / a.slope_scale);
    if (options_.log) options_.log(line);
  }
}

void FastEngine::choose_first_layer() {
  if (!per_edge_first_ || topology_.present.empty()) return;
  const auto elements = static_cast<int64_t>(topology_.present.size());
  const bool reassociate = elements <= options_.reassociate_max_elements;
  if (first_layer_chosen_ && reassociate == reassociated_first_) return;
  if (first_layer_chosen_) graph_.reset();  // (a captured step runs the other layer)
  first_layer_chosen_ = true;
  reassociated_first_ = reassociate;
  if (options_.log)
    options_.log(std::string("first interaction: ") + (reassociate ? "per sender element" : "per edge") + " (" +
                 std::to_string(elements) + " elements present; reassociate auto: per element up to " +
                 std::to_string(options_.reassociate_max_elements) + ")");
}

void FastEngine::update_plan(int64_t atoms, int64_t edges, bool symmetric, bool list_vectors) {
  symmetric = symmetric && !unpaired_seen_;
  if (atoms == planned_atoms_ && edges == planned_edges_ && symmetric == planned_symmetric_ &&
      list_vectors == planned_list_vectors_)
    return;
  const std::string device = p_.options.device().str();
  const double budget =
      options_.memory_bytes > 0 ? options_.memory_bytes : default_memory_budget(device, options_.device_sharers);
  // Paired costs where a whole-step chunk pairs every edge: a list without ghosts, pairs not off.
  StageCosts costs = costs_;
  if (!symmetric || !some_layer_pairs_ || options_.radial_pairs == Choice::Off)
    costs.paired_kept_per_edge = costs.paired_transient_per_edge = 0;
  // The edge vectors in the topology's order, float64: a skin list's for every step; else held by
  // steps that keep their chunks (a recompute plan reads the caller's per chunk: layer_passes.cpp).
  const double sorted_vectors = 3 * 8.0;
  if (list_vectors) {
    costs.resident_per_edge += sorted_vectors;
  } else {
    costs.kept_per_edge += sorted_vectors;
    if (costs.paired_kept_per_edge > 0) costs.paired_kept_per_edge += sorted_vectors;
  }
  const MemoryPlan plan = plan_memory(costs, atoms, edges, budget, options_.edge_chunk, options_.atom_chunk);
  // Printed when the mode or the chunk sizes change, not at every new atom or edge count (LAMMPS
  // changes them at every neighbour-list rebuild); whole-step plans differ only in their sizes.
  const bool changed = planned_atoms_ < 0 || plan.recompute != plan_.recompute || plan.paired != plan_.paired ||
                       (plan.recompute && !plan.same_shape(plan_));
  plan_ = plan;
  planned_atoms_ = atoms;
  planned_edges_ = edges;
  planned_symmetric_ = symmetric;
  planned_list_vectors_ = list_vectors;
  if (changed && options_.log) options_.log(plan_.describe(atoms, edges));
}

// A plan at paired costs assumed about one radial row per two edges. Where the graph has fewer
// pairs (an edge set that is not a full neighbour list, vectors that are not exact negations), later
// steps are planned per edge.
void FastEngine::check_pair_rows(int64_t rows, int64_t edges) {
  if (2 * rows <= edges + edges / 32) return;
  unpaired_seen_ = true;
  if (options_.log)
    options_.log("memory plan: " + std::to_string(rows) + " radial rows for " + std::to_string(edges) +
                 " edges (fewer reverse-edge pairs than a full neighbour list has); planning per edge from the "
                 "next step");
}

void FastEngine::update_topology(const GraphTensors& g, int64_t nlocal, const TopologyOptions& options,
                                 bool keep_storage, const at::Tensor& positions) {
  if (topology_.matches(g, nlocal, options)) return;
  EdgeTopology t = EdgeTopology::build(g, nlocal, options, p_.atomic_numbers, positions);
  ++counters_.topology_builds;
  if (keep_storage && graph_ && topology_.same_shape(t)) {
    topology_.assign_keeping_storage(t);  // the captured step reads these tensors
  } else {
    topology_ = std::move(t);
    graph_.reset();
  }
  choose_first_layer();
}

// Compact node blocks (atom_order.h) pay where a recompute plan runs several of them: on an H100 at
// 1,000,188 atoms of fcc Cu (MP-0-medium shape, float32, blocks of 22k atoms: slabs 5 A thick in
// the lattice's order) the step is 1.075x faster; at 256,000 atoms (slabs of 21 A) it is the same,
// and a no-recompute plan's edge chunks at 62,500 atoms gained nothing (bench/RESULTS.md). Bins of
// half the cutoff: a few atoms each, so that the curve's order inside a block matters little. Not
// with an exchange through other processes, which read the owned rows in the caller's order.
double FastEngine::spatial_bin(const at::Tensor& positions, int64_t nlocal, int64_t edges, HaloExchanger* halo) const {
  if (options_.atom_order == Choice::Off || !positions.defined() || nlocal < 2 || !plan_.recompute) return 0;
  if (plan_.edge_chunk >= edges && plan_.atom_chunk >= nlocal) return 0;
  if (halo) {
    const std::vector<int>* owners = halo->local_owners();
    if (!owners || static_cast<int64_t>(owners->size()) != positions.size(0) - nlocal) return 0;
  }
  return 0.5 * p_.config.r_max;
}

// The caller's edge vectors in topology_'s order, float64. Padding edges get a vector beyond every
// cutoff (the model's and ZBL's): their radial features, messages and energies are exact zeros.
at::Tensor FastEngine::sorted_vectors(const at::Tensor& vectors64) const {
  const int64_t pad = topology_.padded_edges - topology_.edges;
  if (pad == 0) return vectors64.index_select(0, topology_.order);
  at::Tensor padding = at::zeros({pad, 3}, vectors64.options());
  padding.select(1, 0).fill_(4.0 * p_.config.r_max + 10.0);
  return at::cat({vectors64, padding}).index_select(0, topology_.order);
}

// The ghosts' owners when the exchanger names them (one domain), on the model's device: the
// exchanges then stay there.
void FastEngine::update_local_exchange() {
  const std::vector<int>* owners = halo_ ? halo_->local_owners() : nullptr;
  const int64_t nghost = topology_.atoms - topology_.nlocal;
  if (!owners || static_cast<int64_t>(owners->size()) != nghost || nghost == 0) {
    local_ = LocalExchange{};
    return;
  }
  // (the same ghosts and the same rows: no new neighbour list)
  if (local_.owner.defined() && *owners == local_.host && local_.topology == topology_.id) return;
  local_.host = *owners;
  local_.topology = topology_.id;
  at::Tensor owner =
      at::tensor(std::vector<int64_t>(owners->begin(), owners->end()), at::kLong).to(p_.options.device());
  if (topology_.node_row.defined()) owner = topology_.node_row.index_select(0, owner);  // (ghost rows stay)
  const auto sorted = at::sort(owner, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  const auto unique = at::unique_consecutive(std::get<0>(sorted), /*return_inverse=*/false, /*return_counts=*/true);
  local_.owner = owner;
  local_.perm = std::get<1>(sorted);
  local_.owners = std::get<0>(unique);
  local_.counts = std::get<2>(unique);
}

// The halo exchange on the calling thread. With the ghosts' owners known (one domain), in place on
// the model's device: forward a gather of the owners' rows, reverse each owner's ghost rows summed
// in float64 in ghost order (a segment sum: deterministic) and added. Otherwise through the
// exchanger, on float64 rows in (pinned) host memory, or in the model's memory for an exchanger
// that takes them there (rows_in_model_memory: the Kokkos style): forward, the owned rows go out
// and the ghost rows come back (the exchange writes every ghost row); reverse, the ghost rows go
// out and the owners' sums come back, added on the model's device. Padding rows stay where they are.
void FastEngine::exchange(const at::Tensor& all_rows, bool forward) const {
  if (!halo_) return;
  const int64_t nlocal = topology_.nlocal, nghost = topology_.atoms - nlocal;
  const at::Tensor local = all_rows.narrow(0, 0, nlocal), ghost = all_rows.narrow(0, nlocal, nghost);
  const int ncols = static_cast<int>(all_rows.size(1));
  if (local_.owner.defined()) {
    if (forward) {
      ghost.copy_(local.index_select(0, local_.owner));
    } else {
      const at::Tensor sums = at::segment_reduce(ghost.index_select(0, local_.perm).to(at::kDouble), "sum",
                                                 local_.counts, {}, {}, 0, /*unsafe=*/true, at::Scalar(0));
      local.index_add_(0, local_.owners, sums.to(all_rows.scalar_type()));
      ghost.zero_();
    }
    halo_->exchanged_locally(forward, ncols);
    return;
  }
  const bool in_model_memory = halo_->rows_in_model_memory();
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  at::Tensor rows = at::empty({nlocal + nghost, ncols},
                              in_model_memory ? f64.device(all_rows.device()) : f64.pinned_memory(all_rows.is_cuda()));
  // Rows in device memory go to an exchanger that works on other streams: the device must be done
  // with them first (host rows are complete after their blocking copy).
  const bool device_rows = rows.is_cuda();
  // (host rows of a device's features: what crosses, counted as float64)
  const bool staged = !in_model_memory && all_rows.is_cuda();
  const int64_t row_bytes = ncols * static_cast<int64_t>(sizeof(double));
  if (staged) {
    count_to_host((forward ? nlocal : nghost) * row_bytes);
    count_to_device((forward ? nghost : nlocal) * row_bytes);
  }
  if (forward) {
    rows.narrow(0, 0, nlocal).copy_(local);
    if (device_rows) synchronize_device(rows.device().str());
    halo_->forward(rows.data_ptr<double>(), ncols);
    ghost.copy_(rows.narrow(0, nlocal, nghost));
  } else {
    rows.narrow(0, 0, nlocal).zero_();
    rows.narrow(0, nlocal, nghost).copy_(ghost);
    if (device_rows) synchronize_device(rows.device().str());
    halo_->reverse(rows.data_ptr<double>(), ncols);
    local.add_(rows.narrow(0, 0, nlocal).to(all_rows.device(), all_rows.scalar_type()));
    ghost.zero_();
  }
}

EngineResult FastEngine::run(const GraphTensors& g, const at::Tensor& vectors64, int64_t nlocal, HaloExchanger* halo,
                             const EngineRequest& want, const at::Tensor& positions) {
  const at::NoGradGuard no_grad;  // every gradient below is written out; no autograd tape
  leave_list();
  const int64_t ntotal = g.species.size(0);
  const int64_t E = g.sender.size(0);
  const bool cuda = p_.options.device().is_cuda();
  const bool may_graph =
      options_.cuda_graph && cuda && !timer_ && nlocal > 0 && E > 0 && SegmentedCudaGraph::available();
  // A captured step is replayed for every graph of the same bucket: padded sizes (<= 1/16 more).
  const bool may_pad = may_graph || options_.pad_to_bucket;
  const int64_t edges = may_pad ? padded_count(E, 1024) : E;
  // (atoms: only ghost rows change between graphs of one set of owned atoms)
  const int64_t atoms = options_.pad_to_bucket || (may_graph && ntotal > nlocal) ? padded_count(ntotal, 256) : ntotal;
  update_plan(atoms, edges, nlocal == ntotal, /*list_vectors=*/false);
  const bool use_graph = may_graph && plan_.edge_chunk >= edges && plan_.atom_chunk >= nlocal;
  // (in a graph step the pairs cost one check per step: no launches to save there)
  auto paired = [&](int64_t count) {
    return some_layer_pairs_ &&
           (options_.radial_pairs == Choice::On ||
            (options_.radial_pairs == Choice::Auto && (!cuda || use_graph || count >= kMinPairedChunkEdges)));
  };
  TopologyOptions options;
  options.edge_chunk = plan_.edge_chunk;
  options.atom_chunk = plan_.atom_chunk;
  options.row_aligned = plan_.recompute;
  options.edge_elements = edge_elements();
  options.sender_csr = want.any() && p_.config.num_interactions > 1;
  options.atom_sums = want.any();
  if (use_graph || options_.pad_to_bucket) {
    options.padded_edges = edges;
    options.padded_atoms = atoms;
  }
  options.spatial_bin = spatial_bin(positions, nlocal, edges, halo);
  if (options.spatial_bin > 0 && !spatial_said_ && options_.log) {
    spatial_said_ = true;
    char line[200];
    std::snprintf(line, sizeof line,
                  "atom order: the owned atoms along a space-filling curve through %.2f A bins, for node blocks "
                  "of nearby atoms (atom_order auto)",
                  options.spatial_bin);
    options_.log(line);
  }
  if (timer_) timer_->start();
  update_topology(g, nlocal, options, use_graph, positions);
  halo_ = halo;
  update_local_exchange();
  graphed_ = use_graph;
  const EdgeTopology& topo = topology_;

  // The graph's atoms, without the padding rows, in the caller's order.
  auto finish = [&](const EngineResult& out) {
    EngineResult r = out;
    if (r.forces.defined()) r.forces = r.forces.narrow(0, 0, ntotal);
    if (r.atom_virial.defined()) r.atom_virial = r.atom_virial.narrow(0, 0, ntotal);
    if (topo.node_row.defined()) {
      const at::Tensor& row = topo.node_row;
      r.node_energy = r.node_energy.index_select(0, row.narrow(0, 0, nlocal));
      if (r.forces.defined()) r.forces = r.forces.index_select(0, row);
      if (r.atom_virial.defined()) r.atom_virial = r.atom_virial.index_select(0, row);
    }
    return r;
  };

  if (!use_graph) {
    graph_.reset();
    at::Tensor v64 = sorted_vectors(vectors64);
    // Reverse-edge pairs per chunk, shared by both layers and the backward pass (and by later calls
    // while the graph stays the same).
    std::vector<RadialPairCache::Chunk> pair_chunks;
    for (const EdgeChunk& ch : topo.chunks) pair_chunks.push_back({ch.begin, ch.count, paired(ch.count)});
    std::vector<RadialPairs> pairs =
        pair_cache_.pairs(topo.sender, topo.receiver, v64, pair_chunks, p_.options.dtype().toScalarType(), topo.id);
    if (plan_.paired) {
      int64_t rows = 0;
      for (const RadialPairs& p : pairs) rows += p.rows;
      check_pair_rows(rows, E);
    }
    // (padded rows as in a graph step, so that padding tests cover them)
    if (options_.pad_to_bucket)
      for (RadialPairs& p : pairs)
        if (p.index.defined()) p = pad_pair_rows(p, padded_count(p.rows, 1024));
    if (timer_) timer_->lap("graph");
    EngineResult out;
    auto now = [](const SegmentedCudaGraph::HostWork& work) { work(); };
    // A recompute plan reads the caller's vectors per chunk instead (24 bytes per edge less while it
    // runs).
    if (plan_.recompute && topo.padded_edges == topo.edges) {
      v64 = at::Tensor();
      step(at::Tensor(), &pairs, want, now, &out, vectors64);
    } else {
      step(v64, &pairs, want, now, &out);
    }
    return finish(out);
  }

  if (graph_ && (!(graph_want_ == want) || graph_halo_ != (halo != nullptr))) graph_.reset();
  if (!graph_) graph_v64_ = at::empty({edges, 3}, vectors64.options());
  graph_v64_.copy_(sorted_vectors(vectors64));
  if (paired(edges)) {
    update_graph_pairs();
  } else {
    graph_pairs_.clear();
    graph_pairs_generation_ = -1;
  }
  return finish(replay_or_capture(halo, want));
}

// The captured step on graph_v64_, graph_pairs_ and topology_: replayed, or captured (its warm-up
// run's outputs returned) when none is held for this request.
// A graph that computes more than asked (e.g. per-atom virials captured for a thermo step) serves
// the steps that ask for less: requests only grow while a graph lives, so alternating output steps
// capture once.
EngineResult FastEngine::replay_or_capture(HaloExchanger* halo, const EngineRequest& asked) {
  EngineRequest want = asked;
  if (graph_ && graph_halo_ == (halo != nullptr)) {
    want.forces = want.forces || graph_want_.forces;
    want.virial = want.virial || graph_want_.virial;
    want.atom_virial = want.atom_virial || graph_want_.atom_virial;
  }
  if (graph_ && (!(graph_want_ == want) || graph_halo_ != (halo != nullptr))) graph_.reset();
  if (graph_) {
    graph_->replay();
    ++counters_.graph_replays;
    return graph_out_;
  }
  const std::vector<RadialPairs>* pairs = graph_pairs_.empty() ? nullptr : &graph_pairs_;
  // A capture cannot return cached memory to the device, so the blocks that released graphs (an
  // earlier bucket's step) left in the allocator's cache go before it: else a large system whose
  // bucket changes runs out of memory with the old step's memory cached and unused.
  if (counters_.graph_captures > 0) release_cached_memory(p_.options.device().str());
  EngineResult warm;
  const auto t0 = std::chrono::steady_clock::now();
  graph_ = std::make_unique<SegmentedCudaGraph>(
      p_.options.device(),
      [&](const SegmentedCudaGraph::Cut& cut) { step(graph_v64_, pairs, want, cut, &warm); },
      [&](const SegmentedCudaGraph::Cut& cut) { step(graph_v64_, pairs, want, cut, &graph_out_); },
      /*high_priority=*/side_.active());
  graph_want_ = want;
  graph_halo_ = halo != nullptr;
  ++counters_.graph_captures;
  if (options_.log) {
    synchronize_device(p_.options.device().str());  // (a capture is rare: its time is worth a wait)
    const double ms = 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char took[64];
    std::snprintf(took, sizeof took, " (warm-up step and capture: %.0f ms)", ms);
    int64_t rows = 0;  // (the radial MLP's rows: one per reverse-edge pair or unpaired edge)
    if (pairs)
      for (const RadialPairs& p : *pairs) rows += p.rows;
    options_.log("CUDA graph captured: " + std::to_string(graph_->segments()) + " segment(s) for up to " +
                 std::to_string(topology_.padded_edges) + " edges, " +
                 (pairs ? std::to_string(rows) + " radial rows" : std::string("no radial pairs")) + " and " +
                 std::to_string(topology_.padded_atoms) + " atoms" + took);
  }
  return warm;
}

EvaluationCounters FastEngine::counters() const {
  EvaluationCounters c = counters_;
  c.radial_pair_builds = pair_cache_.generation() + skin_pair_builds_;
  return c;
}

void FastEngine::update_graph_pairs() {
  const EdgeTopology& topo = topology_;
  const std::vector<RadialPairs>& made =
      pair_cache_.pairs(topo.sender, topo.receiver, graph_v64_, {{0, topo.padded_edges, true}},
                        p_.options.dtype().toScalarType(), topo.id);
  if (pair_cache_.generation() == graph_pairs_generation_ && !graph_pairs_.empty()) return;
  graph_pairs_generation_ = pair_cache_.generation();
  const RadialPairs padded = pad_pair_rows(made.front(), padded_count(made.front().rows, 1024));
  if (graph_ && graph_pairs_.size() == 1 && graph_pairs_.front().rows == padded.rows) {
    copy_pairs_keeping_storage(graph_pairs_.front(), padded);
  } else {
    graph_pairs_.assign(1, padded);
    graph_.reset();
  }
}

}  // namespace flashmace
