#pragma once
// Host-side conveniences over the Evaluator interface for tools and tests: a structure (or one
// domain of it) in host memory in, host results out. Copies to and from the evaluator's device.
#include <memory>

#include "engine/evaluator.h"
#include "model/reference_model.h"

namespace flashmace {

// The whole structure, with the neighbour list built here (all periodic images within r_max).
Prediction evaluate_structure(Evaluator& evaluator, const Structure& structure);
// The whole structure with a given edge list (e.g. MACE's, from a reference file).
Prediction evaluate_structure(Evaluator& evaluator, const Structure& structure, const Graph& graph);
// One domain of a decomposed system (ghost rows exchanged through `halo`).
LocalPrediction evaluate_local(Evaluator& evaluator, const LocalGraph& graph, HaloExchanger* halo,
                               bool atom_virial = false);

// A neighbour list with its skin, in host memory (the plain pair style): see GraphView::list_id.
struct HostList {
  int nlocal = 0, ntotal = 0;
  std::vector<int64_t> species;           // [ntotal]
  std::vector<int64_t> sender, receiver;  // [F]
  std::vector<int32_t> image;             // [F * 3] lattice offsets of each sender's image
};

// A whole structure's list of every pair within `cutoff` (r_max plus a skin), each sender its own
// atom with the lattice offset of its image. Throws for an element the model lacks.
HostList host_list(const Evaluator& evaluator, const Structure& structure, double cutoff);

// Such a list kept on the evaluator's device between list builds: the connectivity is uploaded
// when list_id changes, only the positions on the other steps, and the results come back in one
// copy.
class ResidentList {
 public:
  ResidentList();
  ~ResidentList();
  // positions [ntotal * 3]; cell rows a, b, c. Host results, as evaluate_local's.
  LocalPrediction evaluate(Evaluator& evaluator, const HostList& list, int64_t list_id, const double* positions,
                           const std::array<double, 9>& cell, double min_distance, HaloExchanger* halo,
                           bool atom_virial);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A structure's graph and output buffers resident on the evaluator's device, for repeated
// evaluations that leave their results there (benchmarks: a step as the Kokkos style will run it).
class ResidentGraph {
 public:
  ResidentGraph(const Evaluator& evaluator, const Structure& structure, const Graph& graph);
  ~ResidentGraph();
  // Energy, forces and virial into device buffers; returns without waiting for the device.
  void evaluate(Evaluator& evaluator, HaloExchanger* halo = nullptr);
  // The energy of the last evaluation (waits for the device).
  double energy() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashmace
