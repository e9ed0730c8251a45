#include "engine/step/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace flashmace {

namespace {

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

int64_t clamp_chunk(double n, int64_t total) {
  const int64_t c = static_cast<int64_t>(std::floor(n));
  return std::max<int64_t>(1, std::min<int64_t>(c, std::max<int64_t>(1, total)));
}

}  // namespace

std::string MemoryPlan::describe(int64_t atoms, int64_t edges) const {
  std::string s = "flashmace fast engine: " + std::to_string(atoms) + " atoms, " + std::to_string(edges) +
                  " edges: edge chunk " + std::to_string(edge_chunk) + ", atom chunk " + std::to_string(atom_chunk);
  if (recompute) {
    const auto kept = std::count(kept_sums.begin(), kept_sums.end(), true);
    const std::size_t layers = kept_sums.size() - (last_layer_fused && !kept_sums.empty() ? 1 : 0);
    s += ", recompute in backward (message sums kept for " + std::to_string(kept) + " of " + std::to_string(layers) +
         " layers" + (last_layer_fused ? "; the last layer's backward pass with its forward pass" : "") + ")";
  } else {
    s += paired ? ", no recompute (radial rows once per reverse-edge pair)" : ", no recompute";
  }
  s += ", predicted peak " + mib(predicted_peak);
  if (atoms > 0) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "; the budget fits about %lld atoms at %.1f edges per atom",
                  static_cast<long long>(largest_atoms), static_cast<double>(edges) / static_cast<double>(atoms));
    s += buf;
  }
  return s;
}

MemoryPlan plan_memory(const StageCosts& c, int64_t atoms, int64_t edges, double budget, int64_t forced_edge_chunk,
                       int64_t forced_atom_chunk) {
  MemoryPlan plan;
  const double E = static_cast<double>(edges), N = static_cast<double>(atoms);
  const double degree = E / std::max(N, 1.0);
  const double resident = c.resident_per_atom * N + c.resident_per_edge * E;
  const double sums = N * std::accumulate(c.sums_per_atom.begin(), c.sums_per_atom.end(), 0.0);
  const double sums_grad =
      N * (c.sums_per_atom.empty() ? 0.0 : *std::max_element(c.sums_per_atom.begin(), c.sums_per_atom.end()));
  const double kept = E * c.kept_per_edge + N * c.kept_per_atom;
  const double per_edge = c.transient_per_edge + c.recomputed_per_edge;
  // A node block of the recompute plan: its edges' recomputed and transient state, its atoms' one.
  const double block_per_atom = degree * per_edge + c.transient_per_atom;
  const double min_block_edges = std::min(std::max(E, 1.0), static_cast<double>(kMinBlockEdges));
  const double min_block = min_block_edges * (per_edge + c.transient_per_atom / std::max(degree, 1.0));
  // The largest system: its resident state beside one block, of kMinBlockEdges edges or, where the
  // budget is smaller, half the budget (the recompute plan's blocks below).
  const double block_reserve = std::min(min_block, 0.5 * budget);
  plan.largest_atoms = static_cast<int64_t>(std::max(
      0.0, (budget - block_reserve) / std::max(c.resident_per_atom + degree * c.resident_per_edge, 1.0)));

  const bool forced = forced_edge_chunk > 0 || forced_atom_chunk > 0;
  if (!forced && c.paired_kept_per_edge > 0) {
    // Without recompute in one chunk whose edges all pair: the radial rows once per pair.
    const double peak = resident + sums + sums_grad + E * c.paired_kept_per_edge + N * c.kept_per_atom +
                        std::max(c.paired_transient_per_edge * E, c.transient_per_atom * N);
    if (peak <= budget) {
      plan.recompute = false;
      plan.kept_sums.assign(c.sums_per_atom.size(), true);
      plan.edge_chunk = clamp_chunk(E, edges);
      plan.atom_chunk = std::max<int64_t>(1, atoms);
      plan.predicted_peak = peak;
      plan.paired = true;
      return plan;
    }
  }
  if (!forced) {
    // Without recompute: everything kept, and the chunks' working sets as large as the rest allows
    // (whole-step chunks when they fit; smaller edge chunks lose nothing but launch overhead).
    const double room = budget - resident - sums - sums_grad - kept;
    const int64_t min_chunk = std::min<int64_t>(std::max<int64_t>(edges, 1), kMinKeptEdgeChunk);
    if (room >= c.transient_per_edge * static_cast<double>(min_chunk) && room >= c.transient_per_atom * N) {
      plan.recompute = false;
      plan.kept_sums.assign(c.sums_per_atom.size(), true);
      plan.edge_chunk = clamp_chunk(room / c.transient_per_edge, edges);
      plan.atom_chunk = std::max<int64_t>(1, atoms);
      plan.predicted_peak = resident + sums + sums_grad + kept +
                            std::max(c.transient_per_edge * static_cast<double>(std::min(plan.edge_chunk, edges)),
                                     c.transient_per_atom * N);
      return plan;
    }
  }
  // Recompute: keep the layers' message sums while blocks of kMinBlockEdges edges still fit, then
  // blocks as large as the rest of the budget allows. When the resident state leaves less than one
  // such block, the blocks get that size or half the budget, whichever is less: the plan then
  // cannot meet the budget and says so in its predicted peak.
  double stored = 0;
  plan.last_layer_fused = c.last_layer_fused;
  for (std::size_t t = 0; t < c.sums_per_atom.size(); ++t) {
    const double layer = c.sums_per_atom[t];
    const bool fused = c.last_layer_fused && t + 1 == c.sums_per_atom.size();
    const bool keep = !fused && resident + stored + N * layer + min_block <= budget;
    plan.kept_sums.push_back(keep);
    if (keep) stored += N * layer;
  }
  double room = budget - resident - stored;
  if (room < min_block) room = std::max(room, std::min(min_block, 0.5 * budget));
  const double block_atoms = room / std::max(block_per_atom, 1.0);
  plan.edge_chunk = forced_edge_chunk > 0 ? forced_edge_chunk : clamp_chunk(block_atoms * degree, edges);
  plan.atom_chunk = forced_atom_chunk > 0   ? forced_atom_chunk
                    : forced_edge_chunk > 0 ? clamp_chunk(room / std::max(c.transient_per_atom, 1.0), atoms)
                                            : clamp_chunk(block_atoms, atoms);
  plan.predicted_peak = resident + stored + per_edge * static_cast<double>(std::min(plan.edge_chunk, edges)) +
                        c.transient_per_atom * static_cast<double>(std::min(plan.atom_chunk, atoms));
  return plan;
}

}  // namespace flashmace
