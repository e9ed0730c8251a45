#pragma once
// One model and the neighbour list of the last structure it evaluated, for the Python calculator
// (python/flashmace/__init__.py). The list is built with a skin and kept while no atom has moved
// more than half the skin and the numbers, cell and periodicity are those it was built for, so an MD
// step hands the engine positions only (GraphView::list_id: no topology rebuilt, CUDA graphs
// replayed). Free of pybind11 (module.cpp binds it).
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/structure.h"
#include "engine/evaluator.h"
#include "engine/host_evaluation.h"

namespace flashmace::python {

struct Results {
  double energy = 0;                // eV
  std::vector<double> forces;       // [N * 3] eV/A
  std::array<double, 9> virial{};   // eV, -sym(sum_e v_e (x) dE/dv_e)
  std::vector<double> energies;     // [N] eV (per_atom)
  std::vector<double> atom_virial;  // [N * 6] xx yy zz xy xz yz, eV (per_atom)
};

class Session {
 public:
  // options: engine_options.h keys and values (device, dtype, path, memory, ...); skin in A.
  Session(const std::string& model, const std::map<std::string, std::string>& options, double skin);
  Results compute(const Structure& structure, bool per_atom);
  const Evaluator& evaluator() const { return *evaluator_; }
  EvaluationCounters counters() const { return evaluator_->counters(); }
  int64_t list_builds() const { return list_id_; }

 private:
  bool list_is_current(const Structure& s) const;
  void build_list(const Structure& s);

  std::unique_ptr<Evaluator> evaluator_;
  double skin_ = 0;
  ResidentList resident_;
  HostList list_;
  Structure listed_;  // the structure list_ was built for
  int64_t list_id_ = 0;
};

}  // namespace flashmace::python
