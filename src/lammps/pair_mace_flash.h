#pragma once
// pair_style mace/flash: MACE potentials through flashmace (docs/pair_style.md). A thin adapter:
// it turns LAMMPS atoms and the full neighbour list into a LocalGraph (nodes = local then ghost
// atoms, in LAMMPS order; edges into local atoms), and is itself the HaloExchanger that refreshes
// ghost-atom features between layers with LAMMPS forward/reverse communication.
#include <memory>
#include <string>
#include <vector>

#include "core/local_graph.h"
#include "pair.h"

namespace flashmace {
class ReferenceModel;
}

namespace LAMMPS_NS {

class PairMACEFlash : public Pair, public flashmace::HaloExchanger {
 public:
  explicit PairMACEFlash(class LAMMPS*);
  ~PairMACEFlash() override;

  void compute(int, int) override;
  void settings(int, char**) override;
  void coeff(int, char**) override;
  void init_style() override;
  double init_one(int, int) override;

  int pack_forward_comm(int, int*, double*, int, int*) override;
  void unpack_forward_comm(int, int, double*) override;
  int pack_reverse_comm(int, int, double*) override;
  void unpack_reverse_comm(int, int*, double*) override;

  // flashmace::HaloExchanger
  void forward(double* rows, int ncols) override;
  void reverse(double* rows, int ncols) override;

 private:
  void allocate();
  flashmace::LocalGraph build_graph();

  std::string device_ = "cpu";
  std::string dtype_;  // "" = the model file's dtype
  bool exchange_ = true;
  std::unique_ptr<flashmace::ReferenceModel> model_;
  std::vector<int> type_atomic_number_;  // [ntypes + 1]
  double cutoff_ = 0.0;

  double* comm_rows_ = nullptr;  // rows being exchanged, [nlocal + nghost][comm_ncols_]
  int comm_ncols_ = 0;
};

}  // namespace LAMMPS_NS
