#include "lammps_halo_exchanger.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "atom.h"
#include "comm.h"
#include "core/error.h"
#include "lammps.h"
#include "lmp_compat.h"
#include "mpi.h"
#include "neighbor.h"

namespace flashmace_lammps {

void LammpsHaloExchanger::start(double* rows, int ncols, const char* direction) {
  // LAMMPS sized its buffers at init from comm_forward/comm_reverse; a wider row would overflow them.
  if (ncols > max_cols_)
    throw flashmace::Error(std::string("mace/flash halo exchange (") + direction + "): rows of " +
                           std::to_string(ncols) + " values exceed the " + std::to_string(max_cols_) +
                           " that LAMMPS's communication buffers were sized for");
  rows_ = rows;
  ncols_ = ncols;
}

LammpsHaloExchanger::Traffic& LammpsHaloExchanger::slot(std::vector<Traffic>& traffic, std::size_t layer) {
  if (traffic.size() <= layer) traffic.resize(layer + 1);
  return traffic[layer];
}

void LammpsHaloExchanger::clear_traffic() {
  forward_traffic_.clear();
  reverse_traffic_.clear();
  in_place_ = false;
}

const std::vector<int>* LammpsHaloExchanger::local_owners() {
  if (lmp_->comm->nprocs != 1) return nullptr;
  const int nlocal = lmp_->atom->nlocal, ntotal = nlocal + lmp_->atom->nghost;
  // Ghosts are made by Comm::borders(), which LAMMPS runs only right before a neighbour-list build;
  // the build sets Neighbor::ago to 0 and every later step's check raises it. So while ago > 0 the
  // ghosts and their owners are those found last (this saves a forward communication per step).
  // (Not Neighbor::ncalls: each run's setup resets it, after sorting the atoms.)
  if (lmp_->neighbor->ago > 0 && owners_nlocal_ == nlocal &&
      owners_.size() == static_cast<std::size_t>(ntotal - nlocal))
    return owners_found_ ? &owners_ : nullptr;
  owners_nlocal_ = nlocal;
  owners_found_ = false;
  std::vector<double> index(static_cast<std::size_t>(ntotal), -1.0);
  for (int i = 0; i < nlocal; ++i) index[static_cast<std::size_t>(i)] = i;
  // The indices travel where LAMMPS packs forward exchanges.
  const bool on_device = device_ && device_->forward_on_device();
  double* rows = on_device ? device_->scratch(index.size()) : index.data();
  if (on_device) device_->to_device(rows, index.data(), index.size());
  start(rows, 1, "ghost owners");
  counting_ = false;
  forward_comm(lmp_->comm, pair_);
  counting_ = true;
  rows_ = nullptr;
  if (on_device) device_->to_host(index.data(), rows, index.size());
  owners_.resize(static_cast<std::size_t>(ntotal - nlocal));
  for (int g = 0; g < ntotal - nlocal; ++g) {
    const double owner = index[static_cast<std::size_t>(nlocal + g)];
    if (!(owner >= 0 && owner < nlocal)) return nullptr;  // not an image of a local atom: use the communication
    owners_[static_cast<std::size_t>(g)] = static_cast<int>(owner);
  }
  owners_found_ = true;
  return &owners_;
}

void LammpsHaloExchanger::exchanged_locally(bool forward, int ncols) {
  in_place_ = true;
  const long long values = static_cast<long long>(lmp_->atom->nghost) * ncols;
  if (forward) {
    layer_ = forwards_++;
    open_.push_back(ncols);
  } else {
    layer_ = open_.empty() ? 0 : open_.size() - 1;
    if (!open_.empty()) open_.pop_back();
  }
  Traffic& t = slot(forward ? forward_traffic_ : reverse_traffic_, layer_);
  ++t.calls;
  t.values += values;
}

void LammpsHaloExchanger::begin() {
  open_.clear();
  forwards_ = 0;
}

void LammpsHaloExchanger::finish() {
  const std::size_t ntotal = lmp_->atom->nlocal + lmp_->atom->nghost;
  while (!open_.empty()) {
    // (host rows: LAMMPS 2022 communicates reverse exchanges on the host)
    std::vector<double> zeros(ntotal * open_.back());
    communicate_reverse(zeros.data(), open_.back());
  }
}

void LammpsHaloExchanger::forward(double* rows, int ncols) {
  if (!device_ || device_->forward_on_device()) {
    communicate_forward(rows, ncols);
    if (device_) device_->fence();
    return;
  }
  // Device rows, host communication: the owned rows go out, the ghost rows come back (the
  // exchange writes every ghost row).
  const std::size_t nlocal = lmp_->atom->nlocal, ntotal = nlocal + lmp_->atom->nghost, width = ncols;
  staged_.resize(ntotal * width);
  device_->to_host(staged_.data(), rows, nlocal * width);
  communicate_forward(staged_.data(), ncols);
  device_->to_device(rows + nlocal * width, staged_.data() + nlocal * width, (ntotal - nlocal) * width);
}

void LammpsHaloExchanger::reverse(double* rows, int ncols) {
  if (!device_) {
    communicate_reverse(rows, ncols);
    return;
  }
  // Device rows: the ghost rows go out, the owners' sums come back and are added there.
  const std::size_t nlocal = lmp_->atom->nlocal, ntotal = nlocal + lmp_->atom->nghost, width = ncols;
  staged_.assign(ntotal * width, 0.0);
  device_->to_host(staged_.data() + nlocal * width, rows + nlocal * width, (ntotal - nlocal) * width);
  communicate_reverse(staged_.data(), ncols);
  device_->add_to_device(rows, staged_.data(), nlocal * width);
  device_->zero(rows + nlocal * width, (ntotal - nlocal) * width);
  device_->fence();
}

void LammpsHaloExchanger::communicate_forward(double* rows, int ncols) {
  start(rows, ncols, "forward");
  layer_ = forwards_++;
  Traffic& t = slot(forward_traffic_, layer_);
  const double t0 = MPI_Wtime();
  forward_comm(lmp_->comm, pair_);
  t.seconds += MPI_Wtime() - t0;
  ++t.calls;
  rows_ = nullptr;
  open_.push_back(ncols);
}

void LammpsHaloExchanger::communicate_reverse(double* rows, int ncols) {
  start(rows, ncols, "reverse");
  // (the layer of the forward exchange it matches: reverse exchanges come last layer first)
  layer_ = open_.empty() ? 0 : open_.size() - 1;
  if (!open_.empty()) open_.pop_back();
  Traffic& t = slot(reverse_traffic_, layer_);
  const double t0 = MPI_Wtime();
  reverse_comm(lmp_->comm, pair_);
  t.seconds += MPI_Wtime() - t0;
  ++t.calls;
  rows_ = nullptr;
  // Multi-hop swaps leave partial sums in ghost rows on the way home; the owners hold the totals.
  const std::size_t nlocal = lmp_->atom->nlocal, ntotal = nlocal + lmp_->atom->nghost;
  std::fill(rows + nlocal * ncols, rows + ntotal * ncols, 0.0);
}

int LammpsHaloExchanger::pack_forward(int n, const int* list, double* buf) const {
  int m = 0;
  for (int k = 0; k < n; ++k) {
    const double* row = rows_ + static_cast<std::size_t>(list[k]) * ncols_;
    for (int c = 0; c < ncols_; ++c) buf[m++] = row[c];
  }
  return m;
}

void LammpsHaloExchanger::unpack_forward(int n, int first, const double* buf) {
  int m = 0;
  for (int i = first; i < first + n; ++i) {
    double* row = rows_ + static_cast<std::size_t>(i) * ncols_;
    for (int c = 0; c < ncols_; ++c) row[c] = buf[m++];
  }
  count_forward_values(m);
}

int LammpsHaloExchanger::pack_reverse(int n, int first, double* buf) {
  int m = 0;
  for (int i = first; i < first + n; ++i) {
    const double* row = rows_ + static_cast<std::size_t>(i) * ncols_;
    for (int c = 0; c < ncols_; ++c) buf[m++] = row[c];
  }
  count_reverse_values(m);
  return m;
}

void LammpsHaloExchanger::unpack_reverse(int n, const int* list, const double* buf) {
  int m = 0;
  for (int k = 0; k < n; ++k) {
    double* row = rows_ + static_cast<std::size_t>(list[k]) * ncols_;
    for (int c = 0; c < ncols_; ++c) row[c] += buf[m++];
  }
}

}  // namespace flashmace_lammps
