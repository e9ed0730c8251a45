#pragma once
// How the fast engine splits a step to fit a memory budget: edges per chunk of the message stage,
// atoms per block of the node stage, whether the chunks' intermediates are kept from the forward to
// the backward pass (no recompute) or recomputed there (activation checkpointing), and in recompute
// plans, per layer, whether the message sums of all atoms are kept or recomputed block by block.
// Torch-free: the per-edge and per-atom costs come from the model's shapes.
#include <cstdint>
#include <string>
#include <vector>

namespace flashmace {

struct StageCosts {
  double kept_per_edge = 0;       // what a step without recompute keeps per edge, all layers together
  double kept_per_atom = 0;       // likewise per atom of the node stage
  double transient_per_edge = 0;  // working set of one edge while its chunk is processed (one layer)
  double recomputed_per_edge = 0; // what recompute rebuilds per edge of a chunk (the largest layer)
  double transient_per_atom = 0;  // working set of one atom in the node stage (one layer)
  double resident_per_atom = 0;   // what lives for the whole step (features, saved layer inputs)
  double resident_per_edge = 0;   // likewise per edge (the cached edge topology, sorted vectors, dE/dv)
  // Per layer: its projected message sums per atom, and their gradient while the layer's backward
  // pass runs, when they are kept for all atoms.
  std::vector<double> sums_per_atom;
  // Recompute plans run the last layer's backward pass block by block right after the block's
  // forward pass: that layer's sums are never kept.
  bool last_layer_fused = false;
  // A whole-step chunk in which every edge's reverse is in the chunk too (one process, no ghosts,
  // radial pairs on): kept_per_edge and transient_per_edge with the radial MLP's rows counted once
  // per reverse-edge pair. 0: not known for this device (the per-edge figures hold).
  double paired_kept_per_edge = 0;
  double paired_transient_per_edge = 0;
};

struct MemoryPlan {
  int64_t edge_chunk = 1;
  int64_t atom_chunk = 1;
  bool recompute = true;       // recompute chunk intermediates in the backward pass
  // Recompute plans: per layer, whether the message sums of all atoms are kept from the forward
  // pass (else each node block's are recomputed with its edges in the backward pass, which then
  // runs the block's messages forward instead of only their geometry and radial MLP).
  std::vector<bool> kept_sums;
  bool last_layer_fused = false;  // recompute plans: StageCosts::last_layer_fused (its kept_sums false)
  bool paired = false;            // planned at StageCosts' paired costs (every edge of the chunk pairs)
  double predicted_peak = 0;   // bytes
  int64_t largest_atoms = 0;   // the most atoms that fit the budget at this plan's edges per atom
  std::string describe(int64_t atoms, int64_t edges) const;
  bool same_shape(const MemoryPlan& o) const {
    return recompute == o.recompute && edge_chunk == o.edge_chunk && atom_chunk == o.atom_chunk &&
           kept_sums == o.kept_sums && last_layer_fused == o.last_layer_fused;
  }
};

// Edge chunks of a no-recompute plan are at least this long (or all edges): shorter chunks would
// trade the recompute for launch overhead.
constexpr int64_t kMinKeptEdgeChunk = 16384;
// A recompute plan keeps a layer's message sums only while node blocks of this many edges (or all
// edges) still fit beside them: below that, the launches of small blocks cost more than the
// messages the stored sums save.
constexpr int64_t kMinBlockEdges = 262144;

// Chunks that fit `budget` bytes. Forced sizes (> 0) win over the budget and mean recompute. Without
// recompute every chunk's intermediates stay alive until the backward pass; that mode is chosen when
// they all fit next to one chunk's working set (edge chunks then as long as the rest of the budget
// allows), else the step recomputes with node blocks sized to the budget, keeping the message sums
// of as many layers as leave room for blocks of kMinBlockEdges edges. With paired costs (StageCosts),
// a whole-step chunk at those costs is tried first.
MemoryPlan plan_memory(const StageCosts& costs, int64_t atoms, int64_t edges, double budget, int64_t forced_edge_chunk,
                       int64_t forced_atom_chunk);

}  // namespace flashmace
