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
#include <string>

#include "engine/edge_geometry_op.h"
#include "engine/edge_topology.h"
#include "engine/evaluator.h"
#include "engine/memory_plan.h"
#include "engine/message_stage.h"
#include "engine/radial_pairs.h"
#include "engine/sc_op.h"
#include "engine/step_graph.h"
#include "model/mace_forward.h"
#include "model/mace_params.h"
#include "model/stage_timer.h"

namespace flashmace {

struct EngineSettings {
  int64_t edge_chunk = 0;  // forced sizes (0 = planner)
  int64_t atom_chunk = 0;
  double memory_bytes = 0;  // budget (0 = default_memory_budget)
  std::string sc = "auto";  // symmetric-contraction executor: auto, specialized, generic
  bool tf32 = false;        // radial-MLP GEMMs in TF32 (float32 on CUDA only)
  bool reassociate = true;  // the first interaction per sender species where it applies
  // One radial-MLP evaluation per pair of reverse edges (radial_pairs.h): "on", "off", or "auto"
  // (on the CPU; on a GPU for chunks of at least kMinPairedChunkEdges, below which the pairing's
  // launches and its host copy cost more than the halved MLP saves).
  std::string radial_pairs = "auto";
  // "on": capture a CUDA step in a CUDA graph and replay it while the graph's shape stays the same
  // (padded to a bucket of edges and atoms); for steps of one edge chunk and one atom chunk, without
  // radial pairs or a stage timer. "off": launch every kernel each step.
  std::string cuda_graph = "on";
  // Pad edges and atoms to the graph bucket even without a CUDA graph (tests the padding's exactness).
  bool pad_to_bucket = false;
  std::function<void(const std::string&)> log;
};

// Energies and edge gradients of one domain.
struct EngineResult {
  at::Tensor node_energy;  // [nlocal] float64, E0 included
  at::Tensor grad;         // [E, 3] float64 dE/dv_e in the caller's edge order; undefined unless asked
};

constexpr int64_t kMinPairedChunkEdges = 100000;

class FastEngine {
 public:
  // file: the model (the SC executors read its coupling tensors); params: its tensors on the device.
  FastEngine(const ModelFile& file, MaceParams params, EngineSettings settings);

  const MaceParams& params() const { return p_; }
  std::string sc_executor() const { return sc_.empty() ? "" : sc_.front().executor(); }
  std::string tp_executor() const { return messages_.empty() ? "" : messages_.front().tp.executor(); }
  void set_stage_timer(StageTimer* timer) { timer_ = timer; }

  // graph: species [ntotal], sender/receiver [E] (int64); vectors [E, 3] float64; all on the model's
  // device. Ghost rows are exchanged through `halo` (may be null).
  EngineResult run(const GraphTensors& graph, const at::Tensor& vectors, int64_t nlocal, HaloExchanger* halo,
                   bool want_grad);

  // The plan the last run used.
  const MemoryPlan& plan() const { return plan_; }
  // Whether the last run replayed or captured a CUDA graph, and how many graphs were captured so far.
  bool graphed() const { return graphed_; }
  int graph_captures() const { return graph_captures_; }

 private:
  MaceParams p_;
  EngineSettings settings_;
  StageCosts costs_;
  MemoryPlan plan_;
  int64_t planned_atoms_ = -1, planned_edges_ = -1;
  at::Tensor h0_table_;                 // [Z, dim(in_0)]: first-layer node features depend only on the species
  at::Tensor hu0_table_;                // [Z, dim(in_0)]: their linear_up
  EdgeGeometryOp geometry_;             // harmonics and radial features of the edges
  std::vector<MessageLayer> messages_;  // per layer: folded radial MLP, fused tensor-product kernels
  std::vector<ScOp> sc_;                // per layer: the symmetric-contraction executor
  StageTimer* timer_ = nullptr;
  RadialPairCache pair_cache_;  // reverse-edge pairs of the last graph
  EdgeTopology topology_;       // connectivity-derived arrays of the last graph
  // The captured step (cuda_graph on): it reads topology_'s tensors, graph_v_ and writes graph_out_.
  struct StepOutputs {
    at::Tensor node_energy;  // [nlocal] float64
    at::Tensor grad_v;       // [padded edges, 3] model dtype, receiver order
  };
  std::unique_ptr<SegmentedCudaGraph> graph_;
  bool graph_want_grad_ = false, graph_halo_ = false;
  at::Tensor graph_v_;  // [padded edges, 3] edge vectors in the model's dtype, receiver order
  StepOutputs graph_out_;
  HaloExchanger* halo_ = nullptr;  // this run's exchanger (read by the step's exchanges)
  bool graphed_ = false;
  int graph_captures_ = 0;

  void update_plan(int64_t atoms, int64_t edges);
  void update_topology(const GraphTensors& graph, int64_t nlocal, const TopologyOptions& options, bool keep_storage);
  // One energy (+ gradient) evaluation on topology_ with sorted edge vectors v; `cut` receives the
  // halo exchanges (run at once, or between graph segments).
  void step(const at::Tensor& v, const std::vector<RadialPairs>* pairs, bool want_grad,
            const SegmentedCudaGraph::Cut& cut, StepOutputs* out);
  void exchange(const at::Tensor& rows, bool forward) const;
  at::Tensor sorted_vectors(const at::Tensor& vectors64) const;
};

}  // namespace flashmace
