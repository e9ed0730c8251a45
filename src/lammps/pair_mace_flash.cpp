#include "pair_mace_flash.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "atom.h"
#include "comm.h"
#include "core/error.h"
#include "core/mace_config.h"
#include "core/model_file.h"
#include "domain.h"
#include "engine/host_evaluation.h"
#include "engine/measure.h"
#include "error.h"
#include "fix_mace_flash_report.h"
#include "force.h"
#include "kspace.h"
#include "lmp_compat.h"
#include "memory.h"
#include "neigh_list.h"
#include "neighbor.h"
#include "update.h"
#include "utils.h"

using namespace LAMMPS_NS;

namespace {

// Messages go to LAMMPS as std::string: the overload taking a string literal would run them
// through fmt, and model-file messages may contain braces.
std::string text(const std::string& s) { return s; }

}  // namespace

PairMACEFlash::PairMACEFlash(LAMMPS* lmp) : Pair(lmp), halo_(lmp, this) {
  single_enable = 0;
  restartinfo = 0;  // the model lives in its file: restarts re-issue pair_style and pair_coeff
  one_coeff = 1;
  manybody_flag = 1;
  no_virial_fdotr_compute = 1;  // the virial comes from the edge vectors (mace_spec.md 10.3)
  // Edge gradients are not along the edges, so the symmetrized per-atom virial is not the centroid
  // form that compute centroid/stress/atom needs: let LAMMPS refuse it rather than mislabel it.
  centroidstressflag = CENTROID_NOTAVAIL;
}

PairMACEFlash::~PairMACEFlash() {
  if (allocated) {
    memory->destroy(setflag);
    memory->destroy(cutsq);
  }
}

void PairMACEFlash::allocate() {
  allocated = 1;
  const int n = atom->ntypes;
  memory->create(setflag, n + 1, n + 1, "pair:setflag");
  memory->create(cutsq, n + 1, n + 1, "pair:cutsq");
  for (int i = 1; i <= n; ++i)
    for (int j = i; j <= n; ++j) setflag[i][j] = 0;
}

void PairMACEFlash::settings(int narg, char** arg) {
  // pair_style may be re-issued for an existing mace/flash pair: start from the defaults.
  options_ = flashmace::EngineOptions();
  exchange_ = true;
  for (int i = 0; i < narg; i += 2) {
    const std::string key = arg[i];
    if (i + 1 >= narg) error->all(FLERR, text("Illegal pair_style mace/flash command: " + key + " needs a value"));
    const std::string value = arg[i + 1];
    try {
      if (flashmace::set_engine_option(options_, key, value)) continue;
    } catch (const flashmace::OptionError& e) {
      error->all(FLERR, text(std::string("Illegal pair_style mace/flash ") + e.what()));
    }
    if (key == "exchange") {
      if (value != "on" && value != "off")
        error->all(FLERR, text("Illegal pair_style mace/flash exchange " + value + ": use on or off"));
      exchange_ = value == "on";
    } else {
      std::string known;
      for (const std::string& k : flashmace::engine_option_keys()) known += k + ", ";
      error->all(FLERR, text("Illegal pair_style mace/flash keyword " + key + ": known are " + known + "exchange"));
    }
  }
  if (model_) load_model();  // new device or dtype for the model of an earlier pair_coeff
}

void PairMACEFlash::coeff(int narg, char** arg) {
  if (!allocated) allocate();
  const int ntypes = atom->ntypes;
  if (narg < 3 || std::strcmp(arg[0], "*") != 0 || std::strcmp(arg[1], "*") != 0)
    error->all(FLERR, "Incorrect args for pair coefficients: use pair_coeff * * model.safetensors "
                      "followed by one element per atom type");
  if (narg != 3 + ntypes)
    error->all(FLERR, text("Incorrect args for pair coefficients: pair_coeff * * model.safetensors needs one "
                           "element per atom type (" + std::to_string(ntypes) + " atom types, " +
                           std::to_string(narg - 3) + " elements given)"));
  model_path_ = arg[2];
  type_element_.assign(ntypes + 1, "");
  for (int t = 1; t <= ntypes; ++t) {
    type_element_[t] = arg[2 + t];
    if (type_element_[t] == "NULL")
      error->all(FLERR, text("Pair style mace/flash does not allow NULL in pair_coeff: every atom type (here type " +
                             std::to_string(t) + ") must map to an element of the model"));
  }
  load_model();
  for (int i = 1; i <= ntypes; ++i)
    for (int j = i; j <= ntypes; ++j) setflag[i][j] = 1;
}

// "cuda" means one GPU per rank: the node-local rank modulo the GPUs this process sees (ranks of one
// node share a GPU only when there are more ranks than GPUs). "cuda:N" is taken as given. Either way
// the ranks of a node that land on the same GPU are counted: they split its default memory budget,
// as a node's CPU ranks split its memory. (Collective on world: every rank takes part.)
PairMACEFlash::PlacedDevice PairMACEFlash::place_device() const {
  const std::string& device = options_.device;
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, comm->me, MPI_INFO_NULL, &node);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  if (device.rfind("cuda", 0) != 0) {  // CPU ranks of a node share its memory
    MPI_Comm_free(&node);
    return {device, local_size};
  }
  const int gpus = flashmace::cuda_device_count();
  PlacedDevice placed{device, 1};
  if (device == "cuda") {
    // More ranks on a node than GPUs share them round-robin: said, never silent (device cuda:N asks
    // for a GPU by name, sharing it on purpose).
    const int crowded = gpus > 0 && local_size > gpus ? 1 : 0;
    int anywhere = 0;
    MPI_Allreduce(&crowded, &anywhere, 1, MPI_INT, MPI_MAX, world);
    if (anywhere && comm->me == 0)
      error->warning(FLERR, text("pair_style mace/flash device cuda: a node runs more MPI ranks than it has GPUs, "
                                 "so ranks share GPUs (node-local rank modulo the GPU count) and wait for each "
                                 "other on them (two ranks on one GPU without CUDA MPS: 5-15x the time per step "
                                 "of one rank alone, measured); start one rank per GPU, or name the GPU with "
                                 "device cuda:N to share on purpose"));
    if (gpus > 0) placed.name = "cuda:" + std::to_string(local_rank % gpus);  // else the evaluator explains
  }
  const int mine = gpus > 0 && placed.name.size() > 5 ? std::atoi(placed.name.c_str() + 5) : -1;
  std::vector<int> all(static_cast<std::size_t>(local_size), -1);
  MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, node);
  MPI_Comm_free(&node);
  if (mine >= 0) placed.sharers = static_cast<int>(std::count(all.begin(), all.end(), mine));
  return placed;
}

// A model that loads on some ranks only (a file on node-local disk missing on one node, a GPU that
// fails on one rank) must not leave the others waiting in error->all's barrier: the ranks agree first,
// then all stop with the first failing rank's message.
void PairMACEFlash::stop_if_any_rank_failed(const std::string& failure) {
  const int failed = failure.empty() ? 0 : 1;
  int failures = 0, first = comm->nprocs;
  const int mine = failed ? comm->me : comm->nprocs;
  MPI_Allreduce(&failed, &failures, 1, MPI_INT, MPI_SUM, world);
  if (failures == 0) return;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, world);
  int length = static_cast<int>(failure.size());
  MPI_Bcast(&length, 1, MPI_INT, first, world);
  std::string message = comm->me == first ? failure : std::string(length, ' ');
  MPI_Bcast(&message[0], length, MPI_CHAR, first, world);
  if (failures < comm->nprocs)
    message += " (it failed on " + std::to_string(failures) + " of " + std::to_string(comm->nprocs) +
               " ranks, first on rank " + std::to_string(first) + ": do all ranks see the same file and devices?)";
  error->all(FLERR, text(message));
}

namespace {

std::string heads_list(const std::vector<std::string>& heads) {
  std::string s;
  for (const auto& h : heads) s += (s.empty() ? "'" : ", '") + h + "'";
  return s;
}

}  // namespace

void PairMACEFlash::load_model() {
  const PlacedDevice placed = place_device();
  const std::string& device = placed.name;
  std::string failure;
  std::vector<std::string> file_heads;
  try {
    const flashmace::ModelFile file = flashmace::ModelFile::load(model_path_);
    file_heads = file.config().heads;
    flashmace::EngineOptions o = options_;
    o.device = device;
    // Ranks sharing a GPU (or a node's memory) split its default budget.
    o.device_sharers = placed.sharers;
    // A line the engine repeats (a CUDA graph captured again for the same sizes, when the energy or
    // per-atom requests change on a thermo step) is logged once: it would split LAMMPS's thermo
    // table at every output step.
    if (comm->me == 0)
      o.log = [this, last = std::string()](const std::string& line) mutable {
        if (line == last) return;
        last = line;
        utils::logmesg(lmp, text(line + "\n"));
      };
    model_ = flashmace::make_evaluator(file, o);
  } catch (const flashmace::Error& e) {
    failure = e.what();
  } catch (const std::exception& e) {
    failure = "Pair style mace/flash cannot load " + model_path_ + " on device " + device + ": " + e.what();
  }
  stop_if_any_rank_failed(failure);
  const flashmace::MaceConfig& config = model_->config();
  std::string known;
  for (int z : config.atomic_numbers) known += std::string(known.empty() ? "" : " ") + flashmace::element_symbol(z);

  type_atomic_number_.assign(type_element_.size(), 0);
  for (std::size_t t = 1; t < type_element_.size(); ++t) {
    const std::string& symbol = type_element_[t];
    const int z = flashmace::atomic_number_from_symbol(symbol);
    if (z == 0)
      error->all(FLERR, text("Pair style mace/flash: " + symbol + " (atom type " + std::to_string(t) +
                             ") is not an element symbol; the model " + model_path_ + " has: " + known));
    if (config.element_index(z) < 0)
      error->all(FLERR, text("Pair style mace/flash: element " + symbol + " (atom type " + std::to_string(t) +
                             ") is not in the model " + model_path_ + ", which has: " + known));
    type_atomic_number_[t] = z;
  }
  if (comm->me == 0)
    utils::logmesg(lmp, text("mace/flash: " + model_path_ + ": elements " + known + ", r_max " +
                             std::to_string(config.r_max) + " A, " + std::to_string(config.num_interactions) +
                             " interactions, hidden irreps " + config.hidden_irreps + ", " +
                             model_->dtype() + " on " + model_->device() + ", " + model_->path() + " path" +
                             (file_heads.size() > 1 ? ", head '" + config.heads.front() + "' of " + heads_list(file_heads)
                                                    : std::string()) +
                             (model_->sc_executor().empty() ? "" : ", SC " + model_->sc_executor()) +
                             (model_->tp_executor().empty() ? "" : ", conv TP " + model_->tp_executor()) + "\n"));
}

void PairMACEFlash::init_style() {
  if (force->newton_pair == 0) error->all(FLERR, "Pair style mace/flash requires newton pair on");
  if (std::strcmp(update->unit_style, "metal") != 0)
    error->all(FLERR, "Pair style mace/flash requires metal units (eV, Angstrom)");
  // MACE models are three-dimensional: a 2d run would evaluate them on a plane they were not trained on.
  if (domain->dimension != 3) error->all(FLERR, "Pair style mace/flash requires a 3d simulation (dimension 3)");
  if (!model_) error->all(FLERR, "Pair style mace/flash needs pair_coeff * * model.safetensors <elements>");
  check_complete_neighbor_lists();
  if (!exchange_ && comm->me == 0)
    error->warning(FLERR, "pair_style mace/flash exchange off: ghost atoms keep stale node features, so energies "
                          "and forces are wrong whenever ghosts exist (a debugging switch)");
  flashmace_lammps::request_full_neighbor_list(neighbor, this, instance_me);

  // Comm::init(), which runs after this, sizes LAMMPS's buffers from these: every layer's node
  // features (at most the hidden irreps) must fit; the last layer's output is not exchanged.
  const flashmace::MaceConfig& config = model_->config();
  const int width = config.num_interactions > 1 ? config.hidden().dim() : 0;
  comm_forward = comm_reverse = width;
  // pair_style hybrid took its sub-styles' widths when it was created, before the model (and so the
  // width) was known; Comm sizes its buffers from the hybrid's, after this.
  if (force->pair != this) {
    force->pair->comm_forward = std::max(force->pair->comm_forward, width);
    force->pair->comm_reverse = std::max(force->pair->comm_reverse, width);
  }
  halo_.set_max_cols(width);
  // (LAMMPS without Pair::finish(): the exchange report comes from an internal fix's post_run)
  if (!flashmace_lammps::pair_has_finish()) FixMACEFlashReport::ensure(lmp);
}

// MACE sums over every neighbour within r_max: a pair LAMMPS leaves out of the list changes the
// environment of both atoms (and, through the message passing, of their neighbours), it does not
// switch one interaction off. LAMMPS has no request for a list that keeps such pairs, so stop.
void PairMACEFlash::check_complete_neighbor_lists() {
  if (neighbor->nex_type || neighbor->nex_group || neighbor->nex_mol)
    error->all(FLERR, "Pair style mace/flash cannot be used with neigh_modify exclude: MACE is a many-body "
                      "potential, so excluded pairs would vanish from every atom's environment and change the "
                      "energies and forces of all their neighbours; remove the exclusion (to hold atoms in place, "
                      "use fix setforce 0.0 0.0 0.0 on their group)");
  // LAMMPS drops a bonded pair from the lists when both its special weights are 0 (LAMMPS's default
  // special_bonds lj/coul 0 0 0), unless a kspace style keeps them (Neighbor::init).
  if (atom->molecular == 0 || force->kspace) return;
  for (int k = 1; k <= 3; ++k)
    if (force->special_lj[k] == 0.0 && force->special_coul[k] == 0.0)
      error->all(FLERR, "Pair style mace/flash needs bonded atoms in its neighbour list, but special_bonds weights "
                        "of 0 (LAMMPS's default lj/coul 0.0 0.0 0.0) remove 1-2, 1-3 or 1-4 pairs from it, so MACE "
                        "would miss those neighbours; use special_bonds lj/coul 1.0 1.0 1.0 (MACE ignores the "
                        "weights; other styles of a pair_style hybrid can keep theirs with pair_modify special)");
}

// A sub-style of pair_style hybrid gets a list without the type pairs assigned to other styles only.
void PairMACEFlash::check_list_has_every_type_pair() {
  if (!list->listskip || !list->ijskip) return;
  for (int i = 1; i <= atom->ntypes; ++i)
    for (int j = 1; j <= atom->ntypes; ++j)
      if (list->ijskip[i][j])
        error->all(FLERR, text("Pair style mace/flash must see every pair of atom types, but pair_style hybrid "
                               "gives type pair " + std::to_string(i) + " " + std::to_string(j) +
                               " to other styles only; use pair_style hybrid/overlay with pair_coeff * * "
                               "mace/flash ... (and no pair_coeff ... none)"));
}

// After delete_atoms or create_atoms a run must rebuild the lists first; run ... pre no does not.
// The atom count is global, so every rank sees the change at once (one collective stop); the list's
// own sizes would not tell on a rank whose atoms were all kept while its ghosts changed.
void PairMACEFlash::check_list_is_current() {
  if (neighbor->ago == 0) {
    natoms_at_list_build_ = atom->natoms;
    return;
  }
  if (atom->natoms != natoms_at_list_build_)
    error->all(FLERR, text("Pair style mace/flash: the neighbour lists were built for " +
                           std::to_string(natoms_at_list_build_) + " atoms but the system has " +
                           std::to_string(atom->natoms) + ": atoms were added or deleted since they were built; "
                           "start the run with pre yes (the default) so that LAMMPS rebuilds them"));
}

// Finite positions in, non-finite energy out: the model, not the simulation, is at fault.
void PairMACEFlash::stop_if_not_finite(double energy, const double* values, std::size_t n, const char* what) {
  bool finite = std::isfinite(energy);
  for (std::size_t i = 0; finite && i < n; ++i) finite = std::isfinite(values[i]);
  if (!finite)
    error->one(FLERR, text("Pair style mace/flash: the model " + model_path_ + " gave a non-finite " +
                           (std::isfinite(energy) ? std::string(what) : std::string("energy")) + " at step " +
                           std::to_string(update->ntimestep) + " although every position is finite (check the "
                           "model file; an untrained or damaged model, or atoms far outside its training data)"));
}

double PairMACEFlash::init_one(int, int) { return model_->cutoff(); }

std::vector<int64_t> PairMACEFlash::type_species() const {
  std::vector<int64_t> species(type_atomic_number_.size(), -1);
  for (std::size_t t = 1; t < species.size(); ++t) species[t] = model_->config().element_index(type_atomic_number_[t]);
  return species;
}

void PairMACEFlash::evaluate_or_stop(const std::function<void()>& evaluation) {
  try {
    halo_.begin();
    evaluation();
    halo_.finish();
  } catch (const flashmace::Error& e) {
    error->one(FLERR, text(e.what()));
  } catch (const std::exception& e) {
    error->one(FLERR, text(std::string("Pair style mace/flash: evaluation failed: ") + e.what()));
  }
}

void PairMACEFlash::finish() {
  report_rebuilds();
  report_transfers();
  report_memory();
  report_exchange();
}

PairMACEFlash::StepTransfers::StepTransfers(PairMACEFlash* pair)
    : pair_(pair), topology_builds_(pair->model_->counters().topology_builds), scope_(&tally_) {}

PairMACEFlash::StepTransfers::~StepTransfers() {
  if (pair_->model_->counters().topology_builds > topology_builds_) {
    pair_->build_transfers_ += tally_;
    ++pair_->transfer_build_steps_;
  } else {
    pair_->step_transfers_ += tally_;
    ++pair_->transfer_steps_;
  }
}

namespace {

std::string bytes_each(long long bytes, long long n) {
  char s[48];
  std::snprintf(s, sizeof(s), "%.0f bytes", static_cast<double>(bytes) / static_cast<double>(n));
  return s;
}

}  // namespace

void PairMACEFlash::report_transfers() {
  if (!model_) return;
  const flashmace::HostTransfers& a = step_transfers_;
  const flashmace::HostTransfers& b = build_transfers_;
  long long mine[8] = {transfer_steps_, transfer_build_steps_, a.to_device_bytes, a.to_host_bytes, a.copies,
                       b.to_device_bytes, b.to_host_bytes, b.copies};
  long long all[8], steps[2];
  MPI_Allreduce(mine, all, 8, MPI_LONG_LONG, MPI_SUM, world);
  MPI_Allreduce(mine, steps, 2, MPI_LONG_LONG, MPI_MAX, world);  // (every rank makes every evaluation)
  step_transfers_ = build_transfers_ = flashmace::HostTransfers();
  transfer_steps_ = transfer_build_steps_ = 0;
  // (the reference path's reverse exchanges run on LibTorch's autograd threads, which the count does
  // not see: its copies are not reported)
  if (comm->me != 0 || model_->device().rfind("cuda", 0) != 0 || model_->path() != "fast" || steps[0] + steps[1] == 0)
    return;
  std::string line = "mace/flash host<->device copies during this run, summed over " + std::to_string(comm->nprocs) +
                     " rank(s) (the pair style's and the engine's; LAMMPS's own not included): ";
  if (steps[0] > 0) {
    char copies[32];
    std::snprintf(copies, sizeof(copies), "%.1f", static_cast<double>(all[4]) / static_cast<double>(steps[0]));
    line += std::to_string(steps[0]) + " evaluations without an edge-topology build, " +
            bytes_each(all[2] + all[3], steps[0]) + " each (" + bytes_each(all[2], steps[0]) + " to the device, " +
            bytes_each(all[3], steps[0]) + " to the host) in " + copies + " copies";
  }
  if (steps[1] > 0)
    line += std::string(steps[0] > 0 ? "; " : "") + std::to_string(steps[1]) + " with one, at least " +
            bytes_each(all[5] + all[6], steps[1]) +
            " each (the list, inputs and outputs; the build's own index reads not counted)";
  utils::logmesg(lmp, text(line + "\n"));
}

void PairMACEFlash::report_memory() {
  if (!model_) return;
  const std::string device = model_->device();
  const double mine[2] = {static_cast<double>(flashmace::peak_memory_bytes(device)),
                          static_cast<double>(flashmace::device_memory_in_use(device))};
  flashmace::reset_peak_memory(device);
  struct {
    double value;
    int rank;
  } in_use{mine[1], comm->me}, most{0, 0};
  MPI_Allreduce(&in_use, &most, 1, MPI_DOUBLE_INT, MPI_MAXLOC, world);
  double peak = mine[0];
  bigint owned = atom->nlocal;
  MPI_Bcast(&peak, 1, MPI_DOUBLE, most.rank, world);
  MPI_Bcast(&owned, 1, MPI_LMP_BIGINT, most.rank, world);
  if (comm->me != 0) return;
  const double per_atom = owned > 0 ? most.value / 1024.0 / static_cast<double>(owned) : 0.0;
  char line[320];
  if (device.rfind("cuda", 0) == 0)
    std::snprintf(line, sizeof(line),
                  "mace/flash memory during this run, rank %d of %d (the most in use): engine peak %.2f GiB; its GPU "
                  "has %.2f GiB in use (LAMMPS's arrays and every process on it included), %.1f KB per owned atom "
                  "(%lld atoms)\n",
                  most.rank, comm->nprocs, peak / 1073741824.0, most.value / 1073741824.0, per_atom,
                  static_cast<long long>(owned));
  else
    std::snprintf(line, sizeof(line),
                  "mace/flash memory during this run, rank %d of %d (the most in use): process peak resident set "
                  "%.2f GiB, %.1f KB per owned atom (%lld atoms)\n",
                  most.rank, comm->nprocs, most.value / 1073741824.0, per_atom, static_cast<long long>(owned));
  utils::logmesg(lmp, line);
}

void PairMACEFlash::report_rebuilds() {
  if (!model_) return;
  const flashmace::EvaluationCounters now = model_->counters();
  long long mine[6] = {now.evaluations - reported_.evaluations, now.topology_builds - reported_.topology_builds,
                       now.radial_pair_builds - reported_.radial_pair_builds,
                       now.graph_captures - reported_.graph_captures, now.graph_replays - reported_.graph_replays,
                       now.bucket_overflows - reported_.bucket_overflows};
  long long all[6] = {0, 0, 0, 0, 0, 0};
  MPI_Allreduce(mine, all, 6, MPI_LONG_LONG, MPI_SUM, world);
  reported_ = now;
  if (all[0] == 0 || comm->me != 0) return;
  utils::logmesg(lmp, text("mace/flash engine during this run, summed over " + std::to_string(comm->nprocs) +
                           " rank(s): " + std::to_string(all[0]) + " evaluations, " + std::to_string(all[1]) +
                           " edge-topology builds, " + std::to_string(all[2]) + " radial-pair builds, " +
                           std::to_string(all[3]) + " CUDA graph captures, " + std::to_string(all[4]) +
                           " graph replays; LAMMPS rebuilt the neighbour lists " +
                           std::to_string(neighbor->ncalls) + " times after the run's setup; " +
                           std::to_string(all[5]) + " steps outgrew the engine's edge bucket (each builds once more)\n"));
}

void PairMACEFlash::report_exchange() {
  using Traffic = flashmace_lammps::LammpsHaloExchanger::Traffic;
  const std::vector<Traffic> directions[2] = {halo_.forward_traffic(), halo_.reverse_traffic()};
  const bool in_place = halo_.exchanged_in_place();  // one rank: its time is inside the step's kernels
  halo_.clear_traffic();
  // Every rank makes the same exchanges, so every rank has the same number of layers and calls.
  int layers = static_cast<int>(std::max(directions[0].size(), directions[1].size()));
  int most = 0;
  MPI_Allreduce(&layers, &most, 1, MPI_INT, MPI_MAX, world);
  if (most == 0) return;
  std::string table;
  for (int layer = 0; layer < most; ++layer)
    for (int d = 0; d < 2; ++d) {
      const Traffic t = layer < static_cast<int>(directions[d].size()) ? directions[d][layer] : Traffic{};
      long long values = 0, calls = 0;
      double sum = 0, max = 0;
      MPI_Allreduce(&t.values, &values, 1, MPI_LONG_LONG, MPI_SUM, world);
      MPI_Allreduce(&t.calls, &calls, 1, MPI_LONG_LONG, MPI_MAX, world);
      MPI_Allreduce(&t.seconds, &sum, 1, MPI_DOUBLE, MPI_SUM, world);
      MPI_Allreduce(&t.seconds, &max, 1, MPI_DOUBLE, MPI_MAX, world);
      if (calls == 0) continue;
      const double per = 1.0 / static_cast<double>(calls);
      char row[160];
      if (in_place)
        std::snprintf(row, sizeof(row), "  %5d  %-9s  %9lld  %17.1f  %13s  %17s  %17s\n", layer + 1,
                      d == 0 ? "forward" : "reverse", calls, static_cast<double>(values) * per, "-", "-", "-");
      else
        std::snprintf(row, sizeof(row), "  %5d  %-9s  %9lld  %17.1f  %13.3f  %17.4f  %17.4f\n", layer + 1,
                      d == 0 ? "forward" : "reverse", calls, static_cast<double>(values) * per,
                      8e-3 * static_cast<double>(values) * per, 1e3 * sum / comm->nprocs * per, 1e3 * max * per);
      table += row;
    }
  if (comm->me == 0)
    utils::logmesg(lmp, text(std::string("mace/flash halo exchange (node features of the layers after the first, ") +
                             (in_place ? "in place on the model's device: one rank, every ghost a periodic image of "
                                         "one of its atoms, nothing sent, no time of its own outside the step's "
                                         "kernels; values are node-feature elements"
                                       : "through LAMMPS's ghost communication, staged through host memory; values "
                                         "are doubles") +
                             "; " + std::to_string(comm->nprocs) + " rank(s)), over all ranks:\n"
                             "  layer  direction  exchanges  values / exchange  kB / exchange  ms / exchange avg  "
                             "ms / exchange max\n" +
                             table));
}

void PairMACEFlash::stop_non_finite_position(tagint tag) {
  error->one(FLERR, text("Pair style mace/flash: atom " + std::to_string(tag) +
                         " has a non-finite position (the simulation has blown up)"));
}

void PairMACEFlash::stop_overlap(tagint tag_i, tagint tag_j, double distance) {
  error->one(FLERR, text("Pair style mace/flash: atoms " + std::to_string(std::min(tag_i, tag_j)) + " and " +
                         std::to_string(std::max(tag_i, tag_j)) + " are " + std::to_string(distance) +
                         " A apart, closer than 0.1 A: overlapping atoms"));
}

std::array<double, 9> PairMACEFlash::cell() const {
  const double* h = domain->h;  // xprd yprd zprd yz xz xy
  return {h[0], 0, 0, h[5], h[1], 0, h[4], h[3], h[2]};
}

void PairMACEFlash::build_list() {
  flashmace::HostList& l = list_;
  const int nlocal = atom->nlocal, nghost = atom->nghost;
  // One rank: every ghost is a periodic image of an owned atom (the exchanger finds which).
  const std::vector<int>* owners = comm->nprocs == 1 ? halo_.local_owners() : nullptr;
  folded_ = owners != nullptr;
  l.nlocal = nlocal;
  l.ntotal = folded_ ? nlocal : nlocal + nghost;
  const std::vector<int64_t> species = type_species();
  l.species.resize(static_cast<std::size_t>(l.ntotal));
  for (int i = 0; i < l.ntotal; ++i) l.species[i] = species[atom->type[i]];
  l.sender.clear();
  l.receiver.clear();
  l.image.clear();
  double** x = atom->x;
  const double* h = domain->h;
  for (int ii = 0; ii < list->inum; ++ii) {
    const int i = list->ilist[ii];
    const int* jlist = list->firstneigh[i];
    for (int jj = 0; jj < list->numneigh[i]; ++jj) {
      const int j = jlist[jj] & NEIGHMASK;
      int n[3] = {0, 0, 0};
      int sender = j;
      if (folded_ && j >= nlocal) {
        // x_j = x_o + n_a a + n_b b + n_c c, with a = (xprd, 0, 0), b = (xy, yprd, 0), c = (xz, yz, zprd).
        sender = (*owners)[j - nlocal];
        const double d[3] = {x[j][0] - x[sender][0], x[j][1] - x[sender][1], x[j][2] - x[sender][2]};
        n[2] = static_cast<int>(std::lround(d[2] / h[2]));
        n[1] = static_cast<int>(std::lround((d[1] - n[2] * h[3]) / h[1]));
        n[0] = static_cast<int>(std::lround((d[0] - n[1] * h[5] - n[2] * h[4]) / h[0]));
      }
      l.sender.push_back(sender);
      l.receiver.push_back(i);
      l.image.insert(l.image.end(), n, n + 3);
    }
  }
  ++list_id_;
}

void PairMACEFlash::compute(int eflag, int vflag) {
  ev_init(eflag, vflag);
  const StepTransfers transfers(this);
  check_list_is_current();
  check_list_has_every_type_pair();
  if (neighbor->ago == 0 || list_id_ == 0) build_list();
  double** x = atom->x;
  // Ghost positions are copies of local ones (here or on another rank), so checking local atoms
  // on every rank covers them all.
  for (int i = 0; i < atom->nlocal; ++i)
    if (!(std::isfinite(x[i][0]) && std::isfinite(x[i][1]) && std::isfinite(x[i][2])))
      stop_non_finite_position(atom->tag[i]);
  const int n = list_.ntotal;
  positions_.resize(3 * static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) positions_[3 * i + d] = x[i][d];
  if (!resident_) resident_ = std::make_unique<flashmace::ResidentList>();
  flashmace::LocalPrediction p;
  flashmace::HaloExchanger* halo = exchange_ && !folded_ ? &halo_ : nullptr;
  evaluate_or_stop([&] {
    try {
      p = resident_->evaluate(*model_, list_, list_id_, positions_.data(), cell(), kMinDistance, halo, vflag_atom != 0);
    } catch (const flashmace::TooCloseError& e) {
      stop_overlap(atom->tag[e.sender], atom->tag[e.receiver], e.distance);
    } catch (const flashmace::NonFinitePositionError& e) {
      stop_non_finite_position(atom->tag[e.node]);
    }
  });
  stop_if_not_finite(p.energy, p.forces.data(), p.forces.size(), "force");

  // Ghost rows too (several ranks): LAMMPS's reverse communication (newton on) adds them to their owners.
  double** f = atom->f;
  for (int i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) f[i][d] += p.forces[3 * i + d];
  if (eflag_global) eng_vdwl += p.energy;
  if (eflag_atom)
    for (int i = 0; i < list_.nlocal; ++i) eatom[i] += p.node_energy[i];
  if (vflag_global) {
    // Both are sum_edges r_ij (x) f_ij (mace_spec.md 10.3); LAMMPS stores xx yy zz xy xz yz.
    const int voigt[6] = {0, 4, 8, 1, 2, 5};
    for (int k = 0; k < 6; ++k) virial[k] += p.virial[voigt[k]];
  }
  if (vflag_atom)
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < 6; ++k) vatom[i][k] += p.atom_virial[6 * i + k];
}

int PairMACEFlash::pack_forward_comm(int n, int* list_, double* buf, int, int*) {
  return halo_.pack_forward(n, list_, buf);
}

void PairMACEFlash::unpack_forward_comm(int n, int first, double* buf) { halo_.unpack_forward(n, first, buf); }

int PairMACEFlash::pack_reverse_comm(int n, int first, double* buf) { return halo_.pack_reverse(n, first, buf); }

void PairMACEFlash::unpack_reverse_comm(int n, int* list_, double* buf) { halo_.unpack_reverse(n, list_, buf); }
