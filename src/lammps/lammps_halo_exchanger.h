#pragma once
// The HaloExchanger of a LAMMPS run: node-feature rows indexed like LAMMPS atoms (local, then
// ghost) travel through LAMMPS's own pair communication, so ghost rows are refreshed exactly the
// way ghost positions are (periodic images, neighbouring ranks, multi-hop swaps alike).
//
// LAMMPS drives the packing: forward()/reverse() call comm->forward_comm / reverse_comm on the
// pair, and the pair's pack_*/unpack_* overrides hand their arguments to the methods below.
#include <cstddef>
#include <vector>

#include "core/local_graph.h"

namespace LAMMPS_NS {
class LAMMPS;
class Pair;
}  // namespace LAMMPS_NS

namespace flashmace_lammps {

// Rows that live in the model's memory (the Kokkos style's memory space, a GPU's on CUDA). LAMMPS
// communicates some exchanges on the host (reverse ones always, in LAMMPS 2022); for those the
// exchanger stages the rows that travel through host memory with these operations.
class DeviceRows {
 public:
  virtual ~DeviceRows() = default;
  // Whether LAMMPS packs and unpacks forward exchanges with the pair's device kernels.
  virtual bool forward_on_device() const = 0;
  virtual double* scratch(std::size_t n) = 0;  // n doubles of device memory, until the next call
  virtual void to_host(double* host, const double* device, std::size_t n) = 0;
  virtual void to_device(double* device, const double* host, std::size_t n) = 0;
  virtual void add_to_device(double* device, const double* host, std::size_t n) = 0;  // device += host
  virtual void zero(double* device, std::size_t n) = 0;
  virtual void fence() = 0;  // the device work queued on the rows is done
};

class LammpsHaloExchanger : public flashmace::HaloExchanger {
 public:
  LammpsHaloExchanger(LAMMPS_NS::LAMMPS* lmp, LAMMPS_NS::Pair* pair) : lmp_(lmp), pair_(pair) {}

  // From then on the model hands rows in its memory, moved by `device` (owned by the caller).
  void use_device_rows(DeviceRows* device) { device_ = device; }
  bool rows_in_model_memory() const override { return device_ != nullptr; }

  // The widest row LAMMPS's comm buffers were sized for (the pair's comm_forward/comm_reverse).
  void set_max_cols(int max_cols) { max_cols_ = max_cols; }
  int max_cols() const { return max_cols_; }

  // flashmace::HaloExchanger. rows: [atom->nlocal + atom->nghost][ncols].
  void forward(double* rows, int ncols) override;  // ghost rows <- their owners' rows
  void reverse(double* rows, int ncols) override;  // owners += ghost rows; ghost rows <- 0
  // On one rank: each ghost's owner, found by sending every local atom's index through LAMMPS's
  // forward communication (periodic images and multi-hop swaps alike); null on several ranks.
  // Found again only after a new neighbour list (LAMMPS makes new ghosts only right before one).
  const std::vector<int>* local_owners() override;
  void exchanged_locally(bool forward, int ncols) override;
  // Whether the exchanges since clear_traffic() were made in the model's memory (local_owners()).
  bool exchanged_in_place() const { return in_place_; }

  // Every exchange is collective: all ranks must make the same sequence of them. A rank whose
  // domain has no edges computes no gradients, so the model skips its backward pass and with it
  // the reverse exchanges its neighbours wait for. Bracket each evaluation with these: finish()
  // makes the missing reverse exchanges (zero gradients, last forward first).
  void begin();
  void finish();

  // The rows of the exchange in progress (null between exchanges) and their width: the Kokkos
  // style packs them with its own kernels. They are in device memory only while LAMMPS
  // communicates on the device (DeviceRows::forward_on_device), in host memory otherwise.
  double* rows() const { return rows_; }
  int ncols() const { return ncols_; }

  // What the exchanges of one exchanged layer moved: values are doubles received by ghost rows
  // (forward) or sent from them to their owners (reverse), self-swaps (periodic images on this
  // rank) included, on this rank; seconds are wall time in LAMMPS's communication calls.
  struct Traffic {
    long long calls = 0, values = 0;
    double seconds = 0;
  };
  // Per exchanged layer (the k-th forward exchange of an evaluation is layer k; a reverse one is
  // the layer of the forward one it matches), since the last clear_traffic().
  const std::vector<Traffic>& forward_traffic() const { return forward_traffic_; }
  const std::vector<Traffic>& reverse_traffic() const { return reverse_traffic_; }
  void clear_traffic();
  // The Kokkos style packs with its own kernels: it reports the values it unpacked / packed.
  void count_forward_values(long long values) {
    if (counting_) forward_traffic_[layer_].values += values;
  }
  void count_reverse_values(long long values) {
    if (counting_) reverse_traffic_[layer_].values += values;
  }

  // Pair::pack_forward_comm & co., with LAMMPS's arguments.
  int pack_forward(int n, const int* list, double* buf) const;
  void unpack_forward(int n, int first, const double* buf);
  int pack_reverse(int n, int first, double* buf);
  void unpack_reverse(int n, const int* list, const double* buf);

 private:
  void start(double* rows, int ncols, const char* direction);
  // One exchange through LAMMPS's communication, on rows where LAMMPS packs them.
  void communicate_forward(double* rows, int ncols);
  void communicate_reverse(double* rows, int ncols);
  static Traffic& slot(std::vector<Traffic>& traffic, std::size_t layer);

  LAMMPS_NS::LAMMPS* lmp_;
  LAMMPS_NS::Pair* pair_;
  int max_cols_ = 0;
  double* rows_ = nullptr;  // the rows of the exchange in progress
  int ncols_ = 0;
  std::vector<int> open_;  // widths of forward exchanges not yet matched by a reverse one
  std::size_t forwards_ = 0;  // forward exchanges of this evaluation so far
  std::size_t layer_ = 0;     // the exchanged layer of the exchange in progress
  std::vector<Traffic> forward_traffic_, reverse_traffic_;
  bool counting_ = true;     // false while local_owners() uses the communication
  bool in_place_ = false;
  std::vector<int> owners_;  // local_owners()
  bool owners_found_ = false;  // whether owners_ names every ghost's owner
  int owners_nlocal_ = -1;     // the local atom count owners_ was found for (-1: not yet)
  DeviceRows* device_ = nullptr;
  std::vector<double> staged_;  // host copies of device rows for host communication
};

}  // namespace flashmace_lammps
