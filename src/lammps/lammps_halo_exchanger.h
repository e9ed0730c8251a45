#pragma once
// The HaloExchanger of a LAMMPS run: node-feature rows indexed like LAMMPS atoms (local, then
// ghost) travel through LAMMPS's own pair communication, so ghost rows are refreshed exactly the
// way ghost positions are (periodic images, neighbouring ranks, multi-hop swaps alike).
//
// LAMMPS drives the packing: forward()/reverse() call comm->forward_comm / reverse_comm on the
// pair, and the pair's pack_*/unpack_* overrides hand their arguments to the methods below.
#include <vector>

#include "core/local_graph.h"

namespace LAMMPS_NS {
class LAMMPS;
class Pair;
}  // namespace LAMMPS_NS

namespace flashmace_lammps {

class LammpsHaloExchanger : public flashmace::HaloExchanger {
 public:
  LammpsHaloExchanger(LAMMPS_NS::LAMMPS* lmp, LAMMPS_NS::Pair* pair) : lmp_(lmp), pair_(pair) {}

  // The widest row LAMMPS's comm buffers were sized for (the pair's comm_forward/comm_reverse).
  void set_max_cols(int max_cols) { max_cols_ = max_cols; }
  int max_cols() const { return max_cols_; }

  // flashmace::HaloExchanger. rows: [atom->nlocal + atom->nghost][ncols].
  void forward(double* rows, int ncols) override;  // ghost rows <- their owners' rows
  void reverse(double* rows, int ncols) override;  // owners += ghost rows; ghost rows <- 0

  // Every exchange is collective: all ranks must make the same sequence of them. A rank whose
  // domain has no edges computes no gradients, so the model skips its backward pass and with it
  // the reverse exchanges its neighbours wait for. Bracket each evaluation with these: finish()
  // makes the missing reverse exchanges (zero gradients, last forward first).
  void begin();
  void finish();

  // The rows of the exchange in progress (null between exchanges) and their width: the Kokkos
  // style packs them with its own kernels.
  double* rows() const { return rows_; }
  int ncols() const { return ncols_; }

  // Pair::pack_forward_comm & co., with LAMMPS's arguments.
  int pack_forward(int n, const int* list, double* buf) const;
  void unpack_forward(int n, int first, const double* buf);
  int pack_reverse(int n, int first, double* buf) const;
  void unpack_reverse(int n, const int* list, const double* buf);

 private:
  void start(double* rows, int ncols, const char* direction);

  LAMMPS_NS::LAMMPS* lmp_;
  LAMMPS_NS::Pair* pair_;
  int max_cols_ = 0;
  double* rows_ = nullptr;  // the rows of the exchange in progress
  int ncols_ = 0;
  std::vector<int> open_;  // widths of forward exchanges not yet matched by a reverse one
};

}  // namespace flashmace_lammps
