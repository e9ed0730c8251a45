#include "engine/step/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/device.h"

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
  return "flashmace fast engine: " + std::to_string(atoms) + " atoms, " + std::to_string(edges) +
         " edges: edge chunk " + std::to_string(edge_chunk) + ", atom chunk " + std::to_string(atom_chunk) +
         (recompute ? ", recompute in backward" : ", no recompute") + ", predicted peak " + mib(predicted_peak);
}

MemoryPlan plan_memory(const StageCosts& c, int64_t atoms, int64_t edges, double budget, int64_t forced_edge_chunk,
                       int64_t forced_atom_chunk) {
  MemoryPlan plan;
  const double E = static_cast<double>(edges), N = static_cast<double>(atoms);
  const double resident = c.resident_per_atom * N + c.resident_per_edge * E;
  const double kept = E * c.kept_per_edge + N * c.kept_per_atom;
  const bool forced = forced_edge_chunk > 0 || forced_atom_chunk > 0;
  if (!forced) {
    // Without recompute: everything kept, and the chunks' working sets as large as the rest allows
    // (whole-step chunks when they fit; smaller edge chunks lose nothing but launch overhead).
    const double room = budget - resident - kept;
    const int64_t min_chunk = std::min<int64_t>(std::max<int64_t>(edges, 1), kMinKeptEdgeChunk);
    if (room >= c.transient_per_edge * static_cast<double>(min_chunk) && room >= c.transient_per_atom * N) {
      plan.recompute = false;
      plan.edge_chunk = clamp_chunk(room / c.transient_per_edge, edges);
      plan.atom_chunk = std::max<int64_t>(1, atoms);
      plan.predicted_peak = resident + kept +
                            std::max(c.transient_per_edge * static_cast<double>(std::min(plan.edge_chunk, edges)),
                                     c.transient_per_atom * N);
      return plan;
    }
  }
  const double room = std::max(budget - resident, 0.5 * budget);
  const double per_edge = c.transient_per_edge + c.recomputed_per_edge;
  plan.edge_chunk = forced_edge_chunk > 0 ? forced_edge_chunk : clamp_chunk(room / per_edge, edges);
  plan.atom_chunk = forced_atom_chunk > 0 ? forced_atom_chunk : clamp_chunk(room / c.transient_per_atom, atoms);
  plan.predicted_peak = resident + std::max(per_edge * static_cast<double>(std::min(plan.edge_chunk, edges)),
                                            c.transient_per_atom * static_cast<double>(std::min(plan.atom_chunk, atoms)));
  return plan;
}

}  // namespace flashmace
