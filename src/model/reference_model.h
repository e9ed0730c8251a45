#pragma once
// Torch-free interface to the reference path: evaluate a structure, get energies, forces and
// stress. LibTorch stays behind the pimpl so that including this header is cheap.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "core/local_graph.h"
#include "core/model_file.h"
#include "core/structure.h"

namespace flashmace {

class StageTimer;

struct EvalOptions {
  std::string dtype;           // "float64", "float32", or "" for the model file's dtype
  std::string device = "cpu";  // "cpu" or "cuda" / "cuda:N"
};

struct Prediction {
  double energy = 0;                  // eV
  double interaction_energy = 0;      // eV, without the atomic reference energies E0 (as MACE)
  std::vector<double> node_energy;    // [N] eV, E0 included
  std::vector<double> forces;         // [N*3] eV/A
  std::array<double, 9> virial{};     // eV, MACE's "virials" = -sym(sum_e v_e (x) dE/dv_e)
  std::array<double, 9> stress{};     // eV/A^3 = -virial / volume; zero for non-periodic input
  std::vector<double> edge_gradient;  // [E*3] dE/dv_e, for callers that scatter forces themselves
};

// Result for one domain of a domain-decomposed evaluation (LocalGraph).
struct LocalPrediction {
  double energy = 0;                // sum over local atoms, eV
  std::vector<double> node_energy;  // [nlocal]
  std::vector<double> forces;       // [(nlocal + nghost) * 3]; ghost rows belong to their owners
  std::array<double, 9> virial{};   // this domain's edges, same convention as Prediction::virial
  std::vector<double> atom_virial;  // [(nlocal + nghost) * 6] xx yy zz xy xz yz, each edge split
                                    // half/half between its two atoms; empty unless requested
};

class ReferenceModel {
 public:
  ReferenceModel(const ModelFile& file, const EvalOptions& options = {});
  ~ReferenceModel();
  ReferenceModel(ReferenceModel&&) noexcept;
  ReferenceModel& operator=(ReferenceModel&&) noexcept;

  const MaceConfig& config() const;
  double cutoff() const { return config().r_max; }

  // Builds the neighbour list itself (all periodic images within r_max).
  Prediction evaluate(const Structure& structure) const;
  // Uses the given graph (edges from the caller, e.g. a reference file or LAMMPS).
  Prediction evaluate(const Structure& structure, const Graph& graph) const;
  // One domain: ghost rows refreshed through `halo` between layers (nullptr disables the exchange,
  // a debugging switch that gives wrong results whenever ghosts exist).
  LocalPrediction evaluate_local(const LocalGraph& graph, HaloExchanger* halo, bool atom_virial = false) const;

  // Charge the stages of following evaluations to `timer` (nullptr: stop timing). For benchmarks.
  void set_stage_timer(StageTimer* timer);

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// The element indices of a structure's atoms; throws naming the atom and element if the model
// does not know one.
std::vector<int64_t> element_indices(const MaceConfig& config, const Structure& structure);

}  // namespace flashmace
