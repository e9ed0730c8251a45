#include "pair_mace_flash.h"

#include <cmath>
#include <cstring>

#include "atom.h"
#include "comm.h"
#include "core/error.h"
#include "core/mace_config.h"
#include "core/model_file.h"
#include "error.h"
#include "force.h"
#include "lmp_compat.h"
#include "memory.h"
#include "model/reference_model.h"
#include "neigh_list.h"
#include "neighbor.h"

using namespace LAMMPS_NS;

namespace {

// Closer than this, two atoms are taken as overlapping (input or integration error), not physics.
constexpr double kMinDistance = 0.1;

}  // namespace

PairMACEFlash::PairMACEFlash(LAMMPS* lmp) : Pair(lmp) {
  single_enable = 0;
  restartinfo = 0;
  one_coeff = 1;
  manybody_flag = 1;
  no_virial_fdotr_compute = 1;  // the virial comes from edge vectors (mace_spec.md 10.3)
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
  for (int i = 0; i < narg; i += 2) {
    const std::string key = arg[i];
    if (i + 1 >= narg) error->all(FLERR, "Illegal pair_style mace/flash command: keyword " + key + " needs a value");
    const std::string value = arg[i + 1];
    if (key == "device") {
      if (value != "cpu" && value.rfind("cuda", 0) != 0)
        error->all(FLERR, "Illegal pair_style mace/flash device " + value + ": use cpu or cuda");
      device_ = value;
    } else if (key == "dtype") {
      if (value != "float32" && value != "float64")
        error->all(FLERR, "Illegal pair_style mace/flash dtype " + value + ": use float32 or float64");
      dtype_ = value;
    } else if (key == "exchange") {
      if (value != "on" && value != "off")
        error->all(FLERR, "Illegal pair_style mace/flash exchange " + value + ": use on or off");
      exchange_ = value == "on";
    } else {
      error->all(FLERR, "Illegal pair_style mace/flash keyword " + key + " (known: device, dtype, exchange)");
    }
  }
}

void PairMACEFlash::coeff(int narg, char** arg) {
  if (!allocated) allocate();
  const int ntypes = atom->ntypes;
  if (narg != 3 + ntypes)
    error->all(FLERR, "Pair coeff for mace/flash needs: * * model.safetensors followed by one element per atom type (" +
                          std::to_string(ntypes) + " types, got " + std::to_string(narg - 3) + " elements)");
  if (std::strcmp(arg[0], "*") != 0 || std::strcmp(arg[1], "*") != 0)
    error->all(FLERR, "Pair coeff for mace/flash must start with * *");

  std::unique_ptr<flashmace::ModelFile> file;
  try {
    file = std::make_unique<flashmace::ModelFile>(flashmace::ModelFile::load(arg[2]));
    model_ = std::make_unique<flashmace::ReferenceModel>(*file, flashmace::EvalOptions{dtype_, device_});
  } catch (const flashmace::Error& e) {
    error->all(FLERR, std::string("Pair style mace/flash: ") + e.what());
  }
  const flashmace::MaceConfig& config = model_->config();
  std::string known;
  for (int z : config.atomic_numbers) known += std::string(known.empty() ? "" : " ") + flashmace::element_symbol(z);

  type_atomic_number_.assign(ntypes + 1, 0);
  for (int t = 1; t <= ntypes; ++t) {
    const std::string symbol = arg[2 + t];
    if (symbol == "NULL")
      error->all(FLERR,
                 "Pair style mace/flash does not allow NULL: every atom type must map to an element of the model");
    const int z = flashmace::atomic_number_from_symbol(symbol);
    if (z == 0 || config.element_index(z) < 0)
      error->all(FLERR, "Pair style mace/flash: element " + symbol + " (type " + std::to_string(t) +
                            ") is not in the model " + std::string(arg[2]) + " (it has: " + known + ")");
    type_atomic_number_[t] = z;
  }
  for (int i = 1; i <= ntypes; ++i)
    for (int j = i; j <= ntypes; ++j) setflag[i][j] = 1;
  cutoff_ = config.r_max;
  // LAMMPS sizes its comm buffers from these at init: the widest node features that travel.
  int width = 0;
  for (int t = 0; t + 1 < config.num_interactions; ++t) width = std::max(width, config.layer_output(t).dim());
  comm_forward = comm_reverse = width;
}

void PairMACEFlash::init_style() {
  if (force->newton_pair == 0) error->all(FLERR, "Pair style mace/flash requires newton pair on");
  if (!model_) error->all(FLERR, "Pair style mace/flash needs a pair_coeff * * model.safetensors <elements> command");
  flashmace_lammps::request_full_neighbor_list(neighbor, this, instance_me);
}

double PairMACEFlash::init_one(int i, int j) {
  if (setflag[i][j] == 0)
    error->all(FLERR, "All pair coeffs are not set (pair_coeff * * model.safetensors <elements>)");
  return cutoff_;
}

flashmace::LocalGraph PairMACEFlash::build_graph() {
  flashmace::LocalGraph g;
  g.nlocal = atom->nlocal;
  g.nghost = atom->nghost;
  const int ntotal = g.nlocal + g.nghost;
  double** x = atom->x;
  const int* type = atom->type;
  g.atomic_numbers.resize(ntotal);
  g.positions.resize(3 * static_cast<std::size_t>(ntotal));
  for (int i = 0; i < ntotal; ++i) {
    g.atomic_numbers[i] = type_atomic_number_[type[i]];
    for (int d = 0; d < 3; ++d) g.positions[3 * i + d] = x[i][d];
  }
  const double cut2 = cutoff_ * cutoff_;
  for (int ii = 0; ii < list->inum; ++ii) {
    const int i = list->ilist[ii];
    if (!(std::isfinite(x[i][0]) && std::isfinite(x[i][1]) && std::isfinite(x[i][2])))
      error->one(FLERR, "Pair style mace/flash: atom " + std::to_string(atom->tag[i]) + " has a non-finite position");
    const int* jlist = list->firstneigh[i];
    for (int jj = 0; jj < list->numneigh[i]; ++jj) {
      const int j = jlist[jj] & NEIGHMASK;
      const double dx = x[i][0] - x[j][0], dy = x[i][1] - x[j][1], dz = x[i][2] - x[j][2];
      const double r2 = dx * dx + dy * dy + dz * dz;
      if (r2 >= cut2) continue;
      if (r2 < kMinDistance * kMinDistance)
        error->one(FLERR, "Pair style mace/flash: atoms " + std::to_string(atom->tag[i]) + " and " +
                              std::to_string(atom->tag[j]) + " are " + std::to_string(std::sqrt(r2)) +
                              " A apart (closer than 0.1 A): overlapping atoms");
      g.sender.push_back(j);
      g.receiver.push_back(i);
    }
  }
  return g;
}

void PairMACEFlash::compute(int eflag, int vflag) {
  ev_init(eflag, vflag);
  const flashmace::LocalGraph g = build_graph();
  flashmace::LocalPrediction p;
  try {
    p = model_->evaluate_local(g, exchange_ ? this : nullptr, vflag_atom != 0);
  } catch (const flashmace::Error& e) {
    error->one(FLERR, std::string("Pair style mace/flash: ") + e.what());
  }
  double** f = atom->f;
  for (int i = 0; i < g.ntotal(); ++i)
    for (int d = 0; d < 3; ++d) f[i][d] += p.forces[3 * i + d];
  if (eflag_global) eng_vdwl += p.energy;
  if (eflag_atom)
    for (int i = 0; i < g.nlocal; ++i) eatom[i] += p.node_energy[i];
  if (vflag_global) {
    // LAMMPS order xx yy zz xy xz yz; both use sum r_ij f_ij, the same sign as MACE's virial.
    const int voigt[6] = {0, 4, 8, 1, 2, 5};
    for (int k = 0; k < 6; ++k) virial[k] += p.virial[voigt[k]];
  }
  if (vflag_atom)
    for (int i = 0; i < g.ntotal(); ++i)
      for (int k = 0; k < 6; ++k) vatom[i][k] += p.atom_virial[6 * i + k];
}

void PairMACEFlash::forward(double* rows, int ncols) {
  comm_rows_ = rows;
  comm_ncols_ = ncols;
  flashmace_lammps::forward_comm(comm, this);
}

void PairMACEFlash::reverse(double* rows, int ncols) {
  comm_rows_ = rows;
  comm_ncols_ = ncols;
  flashmace_lammps::reverse_comm(comm, this);
  // The gradients of ghost rows now live in their owners.
  const int nlocal = atom->nlocal, ntotal = nlocal + atom->nghost;
  std::fill(rows + static_cast<std::size_t>(nlocal) * ncols, rows + static_cast<std::size_t>(ntotal) * ncols, 0.0);
}

int PairMACEFlash::pack_forward_comm(int n, int* list_, double* buf, int, int*) {
  int m = 0;
  for (int k = 0; k < n; ++k) {
    const double* row = comm_rows_ + static_cast<std::size_t>(list_[k]) * comm_ncols_;
    for (int c = 0; c < comm_ncols_; ++c) buf[m++] = row[c];
  }
  return m;
}

void PairMACEFlash::unpack_forward_comm(int n, int first, double* buf) {
  int m = 0;
  for (int i = first; i < first + n; ++i) {
    double* row = comm_rows_ + static_cast<std::size_t>(i) * comm_ncols_;
    for (int c = 0; c < comm_ncols_; ++c) row[c] = buf[m++];
  }
}

int PairMACEFlash::pack_reverse_comm(int n, int first, double* buf) {
  int m = 0;
  for (int i = first; i < first + n; ++i) {
    const double* row = comm_rows_ + static_cast<std::size_t>(i) * comm_ncols_;
    for (int c = 0; c < comm_ncols_; ++c) buf[m++] = row[c];
  }
  return m;
}

void PairMACEFlash::unpack_reverse_comm(int n, int* list_, double* buf) {
  int m = 0;
  for (int k = 0; k < n; ++k) {
    double* row = comm_rows_ + static_cast<std::size_t>(list_[k]) * comm_ncols_;
    for (int c = 0; c < comm_ncols_; ++c) row[c] += buf[m++];
  }
}
