#pragma once
// The one evaluation interface both engines implement (the reference path, the oracle, and the
// fast engine): a graph view in, energies / forces / virials out, with the ghost exchange called
// by the engine itself. Torch-free: callers hand in plain pointers on the evaluator's device (host
// memory for "cpu", device memory for "cuda"), so the pair styles and the Kokkos style include this
// header without LibTorch or CUDA headers.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/local_graph.h"
#include "core/model_file.h"
#include "engine/engine_options.h"

namespace flashmace {

class StageTimer;

// A domain of the (possibly decomposed) system: nodes [0, nlocal) are owned, [nlocal, ntotal) are
// ghosts; every edge's receiver is owned. Pointers are on the evaluator's device and owned by the
// caller; they must stay valid during evaluate().
struct GraphView {
  int64_t nlocal = 0;
  int64_t ntotal = 0;
  int64_t nedges = 0;
  const int64_t* species = nullptr;   // [ntotal] element index (position in the model's atomic_numbers)
  const int64_t* sender = nullptr;    // [nedges], any node
  const int64_t* receiver = nullptr;  // [nedges], < nlocal
  const double* vectors = nullptr;    // [nedges][3] x[receiver] - x[sender] (+ shift), Angstrom
  // With vectors, optionally the positions they were made from [ntotal][3] (Angstrom): read only to
  // order the atoms inside the fast engine (EngineOptions::atom_order; the outputs keep the caller's
  // order). Null: the caller's order.
  const double* order_positions = nullptr;

  // Positions instead of vectors (the pair styles): when `positions` is set, `vectors` is not read
  // and the evaluator forms each edge's vector x[receiver] - x[sender] - image . cell itself, so
  // that an edge and its reverse (the same two atoms, image negated) are exact negatives: ghosts
  // that are periodic images of owned atoms can then be folded into them (sender = the owner).
  const double* positions = nullptr;  // [ntotal][3] (Angstrom)
  const int32_t* image = nullptr;     // [nedges][3] lattice offsets of each sender's image (null: none)
  std::array<double, 9> cell{};       // host memory: rows a, b, c, the lattice vectors (Angstrom)
  // With positions: a neighbour list with its skin, kept between list builds. The edges may be
  // longer than the cutoff (the evaluator drops those itself, on the device, every step), and
  // list_id names the connectivity (species, sender, receiver, image, nlocal, ntotal): the same
  // non-zero value as the last call's promises the same arrays, which are then not read again, so
  // a step between list builds rebuilds nothing. 0: no promise.
  int64_t list_id = 0;
  // With positions: two atoms closer than this (Angstrom) stop the evaluation (TooCloseError); a
  // non-finite position always does (NonFinitePositionError).
  double min_distance = 0;
};

// Two atoms closer than GraphView::min_distance: an input or integration error, not physics to
// extrapolate. Names the two nodes (graph indices) for the caller's message.
class TooCloseError : public Error {
 public:
  TooCloseError(int64_t sender, int64_t receiver, double distance)
      : Error("atoms " + std::to_string(sender) + " and " + std::to_string(receiver) + " (graph nodes) are " +
              std::to_string(distance) + " A apart: overlapping atoms"),
        sender(sender),
        receiver(receiver),
        distance(distance) {}
  int64_t sender, receiver;
  double distance;
};

// A position that is NaN or infinite (GraphView::positions): names the first such node.
class NonFinitePositionError : public Error {
 public:
  explicit NonFinitePositionError(int64_t node)
      : Error("the position of atom " + std::to_string(node) + " (graph node) is not finite"), node(node) {}
  int64_t node;
};

// What to compute. Energy is always computed.
struct Request {
  bool forces = true;
  bool virial = false;
  bool atom_energy = false;
  bool atom_virial = false;
};

// What the evaluations since the evaluator was made rebuilt (the fast path's caches: a plain MD step
// between neighbour-list builds should rebuild nothing). The reference path counts evaluations only.
struct EvaluationCounters {
  int64_t evaluations = 0;
  int64_t topology_builds = 0;     // edge topologies (receiver order, chunks, CSRs) built
  int64_t radial_pair_builds = 0;  // reverse-edge pairings made
  int64_t graph_captures = 0;      // CUDA graphs captured
  int64_t graph_replays = 0;       // steps replayed from a captured graph
  int64_t bucket_overflows = 0;    // steps whose edges within the cutoff outgrew the list's bucket
};

// Caller-owned float64 outputs on the evaluator's device; a pointer may be null when not requested.
struct Outputs {
  double* energy = nullptr;       // [1] sum over owned atoms, E0 included (eV)
  double* node_energy = nullptr;  // [nlocal] (eV)
  double* forces = nullptr;       // [ntotal][3] (eV/A); ghost rows belong to their owners. Overwritten.
  double* virial = nullptr;       // [9] -sym(sum_e v_e (x) dE/dv_e) over this domain's edges (eV)
  double* atom_virial = nullptr;  // [ntotal][6] xx yy zz xy xz yz, each edge half to each end. Overwritten.
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual const MaceConfig& config() const = 0;
  virtual std::string device() const = 0;  // "cpu" or "cuda:N"
  virtual std::string dtype() const = 0;   // "float64" or "float32"
  virtual std::string path() const = 0;    // "fast" or "reference"
  // Waits until the device has finished the work queued so far (the caller's buffers are then
  // complete); nothing on the CPU.
  virtual void synchronize() const = 0;
  // CUDA: queue every following evaluation on `cuda_stream` (a cudaStream_t, e.g. Kokkos's), so
  // that it is ordered with the caller's kernels on that stream without synchronising the device;
  // synchronize() then waits for that stream only. nullptr: LibTorch's current stream.
  virtual void set_stream(void* cuda_stream) = 0;
  // The symmetric-contraction executor in use ("cpu generic avx512", "specialized sm_90", ...; "" for the
  // reference path's einsum).
  virtual std::string sc_executor() const { return ""; }
  virtual std::string tp_executor() const { return ""; }  // the conv TP kernels (fast path)
  double cutoff() const { return config().r_max; }

  // One evaluation. With a halo exchanger, ghost rows of the node features are refreshed from their
  // owners between layers (forward) and their gradients summed into the owners (reverse), called on
  // this thread the same number of times on every rank, also on ranks without edges. nullptr: no
  // exchange (correct only when there are no ghosts, or to show what the exchange is for).
  virtual void evaluate(const GraphView& graph, HaloExchanger* halo, const Request& request,
                        const Outputs& outputs) = 0;

  virtual EvaluationCounters counters() const = 0;

  // Charge the stages of following evaluations to `timer` (nullptr: stop). For benchmarks.
  virtual void set_stage_timer(StageTimer* timer) = 0;
};

// Validates the options against the model (engine_options.h: validate) and loads it on the device.
std::unique_ptr<Evaluator> make_evaluator(const ModelFile& file, const EngineOptions& options);

}  // namespace flashmace
