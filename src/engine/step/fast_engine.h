#pragma once
// The fast engine (DESIGN.md ideas 2 and 3): edges sorted by receiver and processed in chunks whose
// messages are summed and projected by the interaction's linear right away (split projection: the
// [E, paths x C x (2l+1)] message tensor exists only for one chunk, the [N, mid] aggregate never);
// node work in atom chunks; an explicit backward pass, layer by layer in reverse, that recomputes a
// chunk's intermediates instead of storing them (unless the memory plan says everything fits) and
// calls the halo exchanger itself on the calling thread. Internal header (ATen); callers use
// engine/evaluator.h.
#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "engine/ops/edge_geometry_op.h"
#include "engine/step/edge_topology.h"
#include "engine/engine_options.h"
#include "engine/evaluator.h"
#include "engine/ops/irreps_linear.h"
#include "engine/step/memory_plan.h"
#include "engine/step/message_stage.h"
#include "engine/step/node_stage.h"
#include "engine/ops/radial_pairs.h"
#include "engine/ops/sc_op.h"
#include "engine/step/side_stream.h"
#include "engine/step/skin_list.h"
#include "engine/step/step_graph.h"
#include "model/mace_forward.h"
#include "model/mace_params.h"
#include "model/stage_timer.h"

namespace flashmace {

// What a step computes beyond the energies.
struct EngineRequest {
  bool forces = false, virial = false, atom_virial = false;
  bool any() const { return forces || virial || atom_virial; }
  bool operator==(const EngineRequest& o) const {
    return forces == o.forces && virial == o.virial && atom_virial == o.atom_virial;
  }
};

// The outputs of one domain, float64 (forces and virials from the edge gradients, mace_spec.md
// 10.2-10.3); undefined where not requested. A graph replay's tensors are the graph's own: valid
// until the next run().
struct EngineResult {
  at::Tensor node_energy;  // [nlocal], E0 included
  at::Tensor forces;       // [ntotal, 3]
  at::Tensor virial;       // [3, 3]
  at::Tensor atom_virial;  // [ntotal, 6] LAMMPS Voigt order
};

constexpr int64_t kMinPairedChunkEdges = 100000;

class FastEngine {
 public:
  // file: the model (the SC executors read its coupling tensors); params: its tensors on the device.
  // options: the fast path's (engine_options.h), validated by make_evaluator.
  FastEngine(const ModelFile& file, MaceParams params, EngineOptions options);

  const MaceParams& params() const { return p_; }
  std::string sc_executor() const { return sc_.empty() ? "" : sc_.front().executor(); }
  std::string tp_executor() const { return messages_.empty() ? "" : messages_.front().tp.executor(); }
  void set_stage_timer(StageTimer* timer) { timer_ = timer; }

  // graph: species [ntotal], sender/receiver [E] (int64); vectors [E, 3] float64; all on the model's
  // device. Ghost rows are exchanged through `halo` (may be null). positions [ntotal, 3] float64
  // (optional) are read for the atom order only (EngineOptions::atom_order).
  EngineResult run(const GraphTensors& graph, const at::Tensor& vectors, int64_t nlocal, HaloExchanger* halo,
                   const EngineRequest& want, const at::Tensor& positions = {});

  // A neighbour list with its skin, kept between list builds (skin_list.h): `list` is read only
  // when list_id differs from the last call's; every call brings positions [ntotal, 3] and the cell
  // [3, 3] (float64, the model's device). Pairs closer than min_distance throw TooCloseError
  // (node indices). (list_step.cpp)
  EngineResult run_list(const ListTensors& list, int64_t list_id, const at::Tensor& positions, const at::Tensor& cell,
                        double min_distance, HaloExchanger* halo, const EngineRequest& want);

  // The plan the last run used.
  const MemoryPlan& plan() const { return plan_; }
  // Whether the last run replayed or captured a CUDA graph, and how many graphs were captured so far.
  bool graphed() const { return graphed_; }
  // What the runs so far rebuilt (evaluations left to the caller).
  EvaluationCounters counters() const;

 private:
  MaceParams p_;
  EngineOptions options_;
  StageCosts costs_;
  MemoryPlan plan_;
  int64_t planned_atoms_ = -1, planned_edges_ = -1;
  bool planned_symmetric_ = false, planned_list_vectors_ = false;
  bool unpaired_seen_ = false;  // a graph without ghosts left edges unpaired: plan per edge from then on
  at::Tensor h0_table_;                 // [Z, dim(in_0)]: first-layer node features depend only on the species
  at::Tensor hu0_table_;                // [Z, dim(in_0)]: their linear_up
  EdgeGeometryOp geometry_;             // harmonics and radial features of the edges
  std::vector<MessageLayer> messages_;  // per layer: folded radial MLP, fused tensor-product kernels
  // reassociate auto: the first layer per edge too, run instead of messages_[0] when the topology
  // has more elements than options_.reassociate_max_elements (choose_first_layer).
  std::optional<MessageLayer> per_edge_first_;
  bool first_layer_chosen_ = false, reassociated_first_ = true;
  const MessageLayer& message_layer(int t) const {
    return t == 0 && per_edge_first_ && !reassociated_first_ ? *per_edge_first_ : messages_[t];
  }
  bool some_layer_pairs_ = false;  // whether a layer can share radial MLP rows between reverse edges (uses_pairs)
  std::vector<ScOp> sc_;                // per layer: the symmetric-contraction executor
  std::vector<IrrepsLinear> up_;        // per layer: linear_up
  std::vector<IrrepsLinear> project_;   // per layer: the linear after the message sum (mid -> target)
  std::vector<NodeLinears> node_linears_;
  StageTimer* timer_ = nullptr;
  SideStream side_;  // inactive on the CPU or with side_stream off
  RadialPairCache pair_cache_;  // reverse-edge pairs of the last graph
  EdgeTopology topology_;       // connectivity-derived arrays of the last graph
  // The captured step (cuda_graph on): it reads topology_'s tensors, graph_v_ and writes graph_out_.
  std::unique_ptr<SegmentedCudaGraph> graph_;
  EngineRequest graph_want_;
  bool graph_halo_ = false;
  at::Tensor graph_v64_;     // [padded edges, 3] float64 edge vectors in receiver order
  std::vector<RadialPairs> graph_pairs_;  // the captured step's pairs (rows padded), or none
  int64_t graph_pairs_generation_ = -1;   // pair_cache_'s generation they were made from
  EngineResult graph_out_;   // padded rows
  HaloExchanger* halo_ = nullptr;  // this run's exchanger (read by the step's exchanges)
  // When the exchanger names each ghost's local owner (one domain): the exchange in place on the
  // model's device. owner [nghost]; the ghosts sorted by owner (perm), the distinct owners and
  // their ghost counts for deterministic per-owner sums. Undefined: staged through the exchanger.
  struct LocalExchange {
    std::vector<int> host;  // the exchanger's owners these were made from
    int64_t topology = 0;   // the topology whose rows they are
    at::Tensor owner, perm, owners, counts;
  };
  LocalExchange local_;
  // The skin list of run_list (list_id_ names it; 0: none), and the captured compaction that
  // writes topology_, graph_pairs_ and graph_v64_ from positions_ and cell_ on every step.
  std::unique_ptr<SkinList> skin_;
  int64_t list_id_ = 0;
  int64_t skin_pair_builds_ = 0;
  at::Tensor positions_;  // this step's, read by the compaction
  at::Tensor cell_;       // the caller's cell tensor the list's shifts were made with
  std::unique_ptr<SegmentedCudaGraph> compaction_;
  bool graphed_ = false;
  bool spatial_said_ = false;  // the atom order's log line was printed
  int64_t said_blocks_ = 0;  // the block count of the last skin list logged (several blocks)
  int64_t refused_list_id_ = 0;  // the last list adopt_list() refused (its steps take the vectors path)
  int bucket_headroom_ = 0;      // skin lists' bucket headroom (skin_bucket), raised by each overflow
  EvaluationCounters counters_;  // topology builds, graph captures and replays (pairs: pair_cache_)

  void build_radial_splines(const ModelFile& file);  // radial spline: one table per layer
  void estimate_costs();  // costs_ from the model's shapes
  void choose_first_layer();  // reassociate auto: per element or per edge, from topology_'s elements
  // symmetric: every edge's reverse is in the graph (no ghosts), so a whole-step chunk may be planned
  // at the paired costs (StageCosts), unless a graph left edges unpaired before (unpaired_seen_);
  // list_vectors: a skin list's step (its sorted vectors held for every step)
  void update_plan(int64_t atoms, int64_t edges, bool symmetric, bool list_vectors);
  void check_pair_rows(int64_t rows, int64_t edges);
  // Whether the edges' atomic numbers are read (a distance transform, ZBL): else the topology
  // holds none.
  bool edge_elements() const { return p_.zbl || !p_.config.distance_transform.empty(); }
  void update_topology(const GraphTensors& graph, int64_t nlocal, const TopologyOptions& options, bool keep_storage,
                       const at::Tensor& positions);
  // The bins of the atom order for a step of this plan (0: the caller's order).
  double spatial_bin(const at::Tensor& positions, int64_t nlocal, int64_t edges, HaloExchanger* halo) const;
  // The pairs of a captured step from graph_v64_: kept while still valid, else made anew and copied
  // into the captured tensors (or the graph dropped when their padded row count changed).
  void update_graph_pairs();
  EngineResult replay_or_capture(HaloExchanger* halo, const EngineRequest& asked);
  // One evaluation on topology_ with its sorted float64 edge vectors v64; `cut` receives the halo
  // exchanges (run at once, or between graph segments). Outputs have padded rows. (layer_passes.cpp:
  // the forward pass layer by layer, then the backward pass in reverse.) Or, v64 undefined, the
  // caller's vectors of an unpadded topology, read per chunk through its order: a recompute plan then
  // holds no sorted copy of every edge's vector while it runs.
  void step(const at::Tensor& v64, const std::vector<RadialPairs>* pairs, const EngineRequest& want,
            const SegmentedCudaGraph::Cut& cut, EngineResult* out, const at::Tensor& caller_v64 = {});
  struct StepState;  // what one step's passes share (layer_passes.cpp)
  bool geometry_gradients_only(int t) const;
  bool uses_pairs(const StepState& s, std::size_t chunk, int layer) const;
  at::Tensor chunk_vectors(const StepState& s, const EdgeChunk& chunk) const;
  MessageChunkInput message_input(const StepState& s, std::size_t chunk, int layer, const at::Tensor& hu) const;
  NodeChunkInput node_input(const StepState& s, int layer, std::size_t block, const at::Tensor& mlin,
                            const at::Tensor& density) const;
  bool one_chunk_block(std::size_t block) const;
  std::pair<at::Tensor, at::Tensor> block_sum_buffers(int layer, std::size_t block) const;
  void block_sums(const StepState& s, int layer, std::size_t block, const at::Tensor& mlin, const at::Tensor& density,
                  bool accumulate, std::vector<MessageChunkState>* states) const;
  void project_messages(int layer, const MessageChunkOutput& out, const at::Tensor& x_table, const at::Tensor& rows,
                        bool accumulate) const;
  at::Tensor message_gradient(int layer, const at::Tensor& dmlin_rows) const;
  void prepare_radials_beside(StepState& s);
  void zbl_forward(StepState& s);
  void forward_layer(StepState& s, int layer);
  void backward_nodes(StepState& s, int layer, at::Tensor* dh, at::Tensor* dhu);
  void backward_edges(StepState& s, int layer, at::Tensor* dhu);
  void backward_blocks(StepState& s, int layer, at::Tensor* dh, at::Tensor* dhu);
  void block_backward(StepState& s, int layer, std::size_t block, const NodeChunkInput& in, NodeChunkState& node_state,
                      std::vector<MessageChunkState>* states, at::Tensor* dh, at::Tensor* dhu);
  bool fused_backward(const StepState& s, int layer) const;
  void backward_layer(StepState& s, int layer);
  void backward_layer_end(StepState& s, int layer, const at::Tensor& dh, const at::Tensor& dhu);
  void add_side_grad_v(StepState& s);
  void finish_gradients(StepState& s, EngineResult* out);
  void exchange(const at::Tensor& rows, bool forward) const;
  void update_local_exchange();
  at::Tensor sorted_vectors(const at::Tensor& vectors64) const;
  // run_list's parts (list_step.cpp).
  bool adopt_list(const ListTensors& list, const at::Tensor& positions, const at::Tensor& cell, bool may_graph);
  void compact_list(bool use_graph);
  void leave_list();  // run() after run_list(): the vectors path owns topology_ again
  EngineResult step_list(bool use_graph, HaloExchanger* halo, const EngineRequest& want);
};

}  // namespace flashmace
