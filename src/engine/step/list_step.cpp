// FastEngine::run_list: MD steps on a neighbour list with its skin (skin_list.h). At a list build
// the list is sorted, paired and given buckets (adopt_list); on every step the positions go into
// the engine's own buffers, the compaction (captured once per list) applies the cutoff, the
// captured step is replayed, and one flag read says whether the buckets held (else the list is
// adopted anew at these positions and the step run again). Lists that need several edge chunks
// (the memory plan) compact into blocks of rows, a chunk each, without a captured step; only a
// list with a receiver row beyond one chunk takes the vectors path, with the cutoff applied on the
// host side of the device (one nonzero).
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/host_transfers.h"
#include "engine/step/fast_engine.h"

namespace flashmace {

void FastEngine::leave_list() {
  if (!skin_) return;
  compaction_.reset();
  skin_.reset();
  list_id_ = 0;
  graph_.reset();
  topology_ = EdgeTopology{};
}

bool FastEngine::adopt_list(const ListTensors& list, const at::Tensor& positions, const at::Tensor& cell,
                            bool may_graph) {
  compaction_.reset();  // (it reads the old list's tensors)
  skin_.reset();
  const int64_t F = list.graph.sender.size(0), ntotal = list.graph.species.size(0);
  if (F == 0 || list.nlocal == 0) return false;
  const double r_max = p_.config.r_max;
  const at::Tensor v = list_vectors(positions, cell, list.graph.sender, list.graph.receiver, list.image);
  const int64_t count = ((v * v).sum(1) < r_max * r_max).sum().item<int64_t>();
  const std::pair<int64_t, int64_t> previous{graph_ ? topology_.padded_edges : 0,
                                             graph_ && !graph_pairs_.empty() ? graph_pairs_.front().rows : 0};
  // (atoms padded where ghost rows may change between lists of one set of owned atoms)
  const int64_t edges = skin_bucket(count, previous.first, bucket_headroom_);
  const int64_t atoms = may_graph && ntotal > list.nlocal ? padded_count(ntotal, 256) : ntotal;
  update_plan(atoms, edges, list.nlocal == ntotal, /*list_vectors=*/true);
  TopologyOptions o;
  o.edge_chunk = plan_.edge_chunk;
  o.atom_chunk = plan_.atom_chunk;
  o.edge_elements = edge_elements();
  o.padded_atoms = atoms;
  o.sender_csr = p_.config.num_interactions > 1;
  o.atom_sums = true;
  const bool cuda = p_.options.device().is_cuda();
  const bool pairs =
      some_layer_pairs_ && (options_.radial_pairs == Choice::On ||
                            (options_.radial_pairs == Choice::Auto && (!cuda || may_graph || count >= kMinPairedChunkEdges)));
  auto skin = std::make_unique<SkinList>(SkinList::build(list, positions, cell, r_max, o, pairs,
                                                         p_.options.dtype().toScalarType(), p_.atomic_numbers, previous,
                                                         bucket_headroom_));
  if (skin->blocks() == 0) return false;  // (a receiver row with more edges than the plan's chunk)
  if (plan_.paired && pairs) check_pair_rows(skin->pair_rows, skin->edges_within);
  if (skin->blocks() > 1 && skin->blocks() != said_blocks_ && options_.log) {
    said_blocks_ = skin->blocks();
    options_.log("neighbour list: " + std::to_string(skin->blocks()) + " blocks of receiver rows, one edge chunk " +
                 "each (the memory plan's), compacted on every step without rebuilding; steps not captured");
  }
  ++counters_.topology_builds;
  if (pairs) ++skin_pair_builds_;
  // A step captured for the last list reads topology_, graph_pairs_ and graph_v64_: it stays when
  // the new list has the same shapes (then only their contents change).
  const bool same_pairs = graph_pairs_.size() == skin->pairs.size() &&
                          (graph_pairs_.empty() || graph_pairs_.front().rows == skin->pairs.front().rows);
  if (graph_ && topology_.same_shape(skin->topology) && same_pairs) {
    topology_.assign_keeping_storage(skin->topology);
  } else {
    graph_.reset();
    topology_ = skin->topology;
    graph_pairs_ = skin->pairs;
    graph_v64_ = at::empty({topology_.padded_edges, 3}, positions.options());
  }
  choose_first_layer();
  positions_ = at::empty_like(positions);
  cell_ = cell;
  skin_ = std::move(skin);
  return true;
}

void FastEngine::compact_list(bool use_graph) {
  auto body = [this](const SegmentedCudaGraph::Cut&) { skin_->compact(positions_, &topology_, &graph_pairs_, &graph_v64_); };
  if (!use_graph) return body([](const SegmentedCudaGraph::HostWork& work) { work(); });
  if (compaction_) return compaction_->replay();
  compaction_ = std::make_unique<SegmentedCudaGraph>(p_.options.device(), body, body);  // (the warm-up ran it)
}

EngineResult FastEngine::step_list(bool use_graph, HaloExchanger* halo, const EngineRequest& want) {
  halo_ = halo;
  update_local_exchange();
  graphed_ = use_graph;
  EngineResult out;
  if (use_graph) {
    out = replay_or_capture(halo, want);
  } else {
    graph_.reset();
    step(graph_v64_, graph_pairs_.empty() ? nullptr : &graph_pairs_, want,
         [](const SegmentedCudaGraph::HostWork& work) { work(); }, &out);
  }
  const int64_t ntotal = topology_.atoms;
  if (out.forces.defined()) out.forces = out.forces.narrow(0, 0, ntotal);
  if (out.atom_virial.defined()) out.atom_virial = out.atom_virial.narrow(0, 0, ntotal);
  return out;
}

EngineResult FastEngine::run_list(const ListTensors& list, int64_t list_id, const at::Tensor& positions,
                                  const at::Tensor& cell, double min_distance, HaloExchanger* halo,
                                  const EngineRequest& want) {
  const at::NoGradGuard no_grad;
  const bool may_graph = options_.cuda_graph && p_.options.device().is_cuda() && !timer_ && list.nlocal > 0 &&
                         SegmentedCudaGraph::available();
  const double r_max = p_.config.r_max;
  // (a list refused once, e.g. for a receiver row beyond a chunk, is not tried again)
  if ((list_id != list_id_ || !skin_) && list_id != refused_list_id_) {
    check_finite_positions(positions);  // (the list's buckets are sized from them)
    list_id_ = list_id;
    if (!adopt_list(list, positions, cell, may_graph)) {
      list_id_ = 0;
      refused_list_id_ = list_id;
    }
  }
  if (!skin_) {
    // The vectors path: the edges within the cutoff, picked here.
    const EdgesWithin within = edges_within(list, positions, cell, r_max, min_distance);
    EngineResult r = run(within.graph, within.vectors, list.nlocal, halo, want, positions);
    list_id_ = 0;  // (run() left list mode; the next call adopts the list again)
    return r;
  }
  // (a list of several blocks is a large system's: its step is not captured)
  const bool use_graph = may_graph && skin_->blocks() == 1;
  positions_.copy_(positions);
  if (!cell.is_same(cell_)) {  // (the evaluator makes a new tensor when the box changes)
    skin_->set_cell(cell);
    cell_ = cell;
  }
  compact_list(use_graph);
  // The one read per step: whether the buckets held, and the closest pair. With no exchange to keep
  // in step with other ranks, the step is queued behind the compaction before that read, so the
  // device never waits for the host in between; a step on outgrown buckets is discarded. The read
  // waits for the compaction only: the host returns, and its caller queues the outputs' copies,
  // while the device still runs the step.
  skin_->request_status();
  EngineResult out;
  bool stepped = use_graph && halo == nullptr;
  if (stepped) out = step_list(use_graph, halo, want);
  at::Tensor status = skin_->host_status();
  if (status[2].item<double>() > 0) check_finite_positions(positions_);
  if (status[0].item<double>() > 0) {
    ++counters_.bucket_overflows;
    bucket_headroom_ = std::min(bucket_headroom_ + 1, 3);
    if (!adopt_list(list, positions, cell, may_graph))
      return run_list(list, 0, positions, cell, min_distance, halo, want);
    positions_.copy_(positions);
    compact_list(use_graph);
    status = skin_->status().to(at::kCPU);
    if (positions_.is_cuda()) count_to_host(status.numel() * static_cast<int64_t>(sizeof(double)));
    if (status[0].item<double>() > 0) throw Error("skin list: the edges within the cutoff overflowed a fresh bucket");
    stepped = false;
  }
  const double closest = std::sqrt(status[1].item<double>());
  if (closest < min_distance) {
    const auto [s, r] = skin_->closest_edge(skin_->vectors(positions_));
    throw TooCloseError(s, r, closest);
  }
  return stepped ? out : step_list(use_graph, halo, want);
}

}  // namespace flashmace
