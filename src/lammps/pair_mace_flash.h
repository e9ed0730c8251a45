#pragma once
// pair_style mace/flash: MACE potentials through flashmace (docs/pair_style.md). A thin adapter:
// at each neighbour-list build LAMMPS's full list, skin included, becomes the engine's list
// (flashmace::HostList; on one rank every ghost folded into the owned atom it is an image of, with
// its lattice offset), and every step hands the engine positions only (GraphView::list_id: the
// engine applies the cutoff on its device and rebuilds nothing between list builds). The model's
// energies, forces and virials go back into LAMMPS's arrays; on several ranks the ghosts stay rows
// of the graph and the per-layer ghost exchange travels through LAMMPS's pair communication
// (LammpsHaloExchanger).
// It is also the common base of the Kokkos style (kokkos/pair_mace_flash_kokkos.h): keywords,
// type-to-element mapping, model loading, run checks and error messages live here once.
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/host_transfers.h"
#include "core/local_graph.h"
#include "engine/engine_options.h"
#include "engine/evaluator.h"
#include "engine/host_evaluation.h"
#include "lammps_halo_exchanger.h"
#include "pair.h"

namespace LAMMPS_NS {

class PairMACEFlash : public Pair {
 public:
  explicit PairMACEFlash(class LAMMPS*);
  ~PairMACEFlash() override;

  void compute(int, int) override;
  void settings(int, char**) override;
  void coeff(int, char**) override;
  void init_style() override;
  double init_one(int, int) override;
  // Prints what the per-layer halo exchange moved and cost since the last report, in the style of
  // LAMMPS's timing breakdown (collective), and starts counting anew; nothing when nothing was
  // exchanged. Called at the end of every run: by LAMMPS through finish(), which overrides
  // Pair::finish() where LAMMPS has it (releases after 2022), else by FixMACEFlashReport.
  void report_exchange();
  void finish();
  // Prints what the engine rebuilt during the run (topologies, radial pairs, CUDA graphs) beside
  // LAMMPS's neighbour-list builds (Neighbor::ncalls, which the run's setup resets), summed over
  // ranks, and starts counting anew (collective).
  void report_rebuilds();
  // Prints, for a model on a GPU (the fast path), the bytes the style and the engine copied between host and device
  // memory per step during the run, summed over ranks: on steps that built no edge topology (every
  // copy counted) and on those that did (their bulk copies), then starts counting anew (collective).
  void report_transfers();
  // Prints the memory of the rank that used most during the run: the engine's peak allocation,
  // what its device has in use (LAMMPS's own arrays included) and that per owned atom; then starts
  // the engine's peak anew (collective).
  void report_memory();

  // Ghost-row exchange of node features (forward) and their gradients (reverse).
  int pack_forward_comm(int, int*, double*, int, int*) override;
  void unpack_forward_comm(int, int, double*) override;
  int pack_reverse_comm(int, int, double*) override;
  void unpack_reverse_comm(int, int*, double*) override;

 protected:
  // Closer than this, two atoms overlap: an input or integration error, not physics to extrapolate.
  static constexpr double kMinDistance = 0.1;  // A

  // The model's element index of each atom type ([ntypes + 1], index 0 unused).
  std::vector<int64_t> type_species() const;
  // Runs one evaluation, turning what the engine throws into LAMMPS errors.
  void evaluate_or_stop(const std::function<void()>& evaluation);
  // Counts the host<->device copies of one compute() (core/host_transfers.h) while it lives, and
  // files them under steps with or without an edge-topology build when it ends.
  class StepTransfers {
   public:
    explicit StepTransfers(PairMACEFlash* pair);
    ~StepTransfers();
    StepTransfers(const StepTransfers&) = delete;
    StepTransfers& operator=(const StepTransfers&) = delete;

   private:
    PairMACEFlash* pair_;
    int64_t topology_builds_;
    flashmace::HostTransfers tally_;
    flashmace::HostTransferScope scope_;
  };
  // The run checks' messages, shared by both styles (error->one: only this rank may know).
  void stop_non_finite_position(tagint tag);
  void stop_overlap(tagint tag_i, tagint tag_j, double distance);
  // energy (and the n values, e.g. forces) finite, else a stop naming the model and the step.
  void stop_if_not_finite(double energy, const double* values, std::size_t n, const char* what);
  // The checks that the neighbour list holds every pair within the cutoff (docs/pair_style.md).
  void check_complete_neighbor_lists();
  void check_list_has_every_type_pair();
  void check_list_is_current();

 private:
  void allocate();
  void load_model();
  void stop_if_any_rank_failed(const std::string& failure);
  // At a list build: list_ from LAMMPS's list (folding ghosts on one rank), list_id_ raised.
  void build_list();

 protected:
  // pair_style keywords: the engine's (engine_options.h) and the style's own
  flashmace::EngineOptions options_;
  bool exchange_ = true;

  // The device this rank runs on, and how many ranks of its node run on the same GPU (1 otherwise).
  struct PlacedDevice {
    std::string name;
    int sharers = 1;
  };
  PlacedDevice place_device() const;

  // pair_coeff
  std::string model_path_;
  std::vector<std::string> type_element_;  // [ntypes + 1], index 0 unused
  std::vector<int> type_atomic_number_;    // [ntypes + 1]

  std::unique_ptr<flashmace::Evaluator> model_;
  flashmace::EvaluationCounters reported_;  // the counters at the last report_rebuilds()
  // Since the last report_transfers(): the copies of steps that built no edge topology, and of those
  // that did, with the number of each.
  flashmace::HostTransfers step_transfers_, build_transfers_;
  long long transfer_steps_ = 0, transfer_build_steps_ = 0;
  bigint natoms_at_list_build_ = -1;        // atom->natoms when the lists were last built
  flashmace_lammps::LammpsHaloExchanger halo_;

 protected:
  // The lattice vectors a, b, c of the current box (rows).
  std::array<double, 9> cell() const;
  int64_t list_id_ = 0;            // raised at every list build (GraphView::list_id)
  bool folded_ = false;            // the engine's list has no ghost rows (one rank)

 private:
  flashmace::HostList list_;       // the engine's list: built at list builds
  std::vector<double> positions_;  // [list_.ntotal * 3], this step's
  std::unique_ptr<flashmace::ResidentList> resident_;
};

}  // namespace LAMMPS_NS
