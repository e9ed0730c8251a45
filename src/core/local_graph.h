#pragma once
// The domain-decomposed graph (DESIGN.md idea 4): nodes are this domain's local atoms followed by
// ghost atoms (explicit periodic/neighbour-domain images, no shifts); every edge has a local
// receiver, so each domain computes exactly the messages into the atoms it owns. Ghost rows of the
// node features are filled from their owners by a HaloExchanger between layers.
#include <cstdint>
#include <vector>

#include "core/structure.h"

namespace flashmace {

struct LocalGraph {
  int nlocal = 0;
  int nghost = 0;
  std::vector<int> atomic_numbers;  // [nlocal + nghost]
  std::vector<double> positions;    // [(nlocal + nghost) * 3]
  std::vector<int64_t> sender;      // any node
  std::vector<int64_t> receiver;    // always < nlocal
  int ntotal() const { return nlocal + nghost; }
  int num_edges() const { return static_cast<int>(sender.size()); }
};

// Owner -> ghost copies of node features and the transpose for gradients. Rows are
// [nlocal + nghost][ncols] row-major doubles, on the host unless rows_in_model_memory().
class HaloExchanger {
 public:
  virtual ~HaloExchanger() = default;
  virtual void forward(double* rows, int ncols) = 0;  // ghost rows <- their owners' rows
  virtual void reverse(double* rows, int ncols) = 0;  // owners += ghost rows; ghost rows <- 0

  // true: forward/reverse take rows in the model's memory (a GPU's for a CUDA model), for an
  // exchanger whose communication reads them there (the Kokkos pair style), so that they need not
  // be staged through the host. The caller's device work on the rows is finished when it hands
  // them over, and the exchanger's when the call returns.
  virtual bool rows_in_model_memory() const { return false; }

  // One domain (a single process: every ghost is a periodic image of one of its own atoms): the
  // local row that each ghost row g (node nlocal + g) copies, or null. A caller that gets them may
  // exchange in its own memory (a gather forward, per-owner sums reverse: no staging through host
  // rows) instead of calling forward/reverse, and reports each such exchange to exchanged_locally().
  virtual const std::vector<int>* local_owners() { return nullptr; }
  virtual void exchanged_locally(bool /*forward*/, int /*ncols*/) {}
};

// A periodic structure as one domain: the atoms are local, every periodic image within `cutoff` of
// a local atom is a ghost; ghost_owner[g] is the local atom ghost g (node nlocal + g) copies.
LocalGraph periodic_local_graph(const Structure& s, double cutoff, std::vector<int>* ghost_owner);

// The in-process exchanger for such a graph (tests and single-process use).
class OwnerMapExchanger : public HaloExchanger {
 public:
  OwnerMapExchanger(int nlocal, std::vector<int> ghost_owner) : nlocal_(nlocal), owner_(std::move(ghost_owner)) {}
  void forward(double* rows, int ncols) override;
  void reverse(double* rows, int ncols) override;

 private:
  int nlocal_;
  std::vector<int> owner_;
};

}  // namespace flashmace
