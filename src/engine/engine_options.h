#pragma once
// Every option of an evaluation, defined once: the pair styles, the command-line tools and the
// tests fill one EngineOptions through one parser (set_engine_option: one spelling, one message per
// mistake), make_evaluator validates it once, and the engine reads it as it is. Torch-free.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "sc/sc_executor_kind.h"

namespace flashmace {

enum class EvaluationPath { Fast, Reference };
enum class Dtype { FromModel, Float64, Float32 };  // FromModel: the model file's own dtype
enum class Choice { Auto, On, Off };
enum class RadialMode { Exact, Spline };

// reassociate auto: the most elements present for which the reassociated first interaction runs. Its
// cost grows with each element present (the per-row GEMMs and the S buffers), the per-edge layer's
// does not; on the H200 (MP-0-medium shape, float32, 4,000 and 62,500 atoms) it is still 1.02x
// faster at 8 elements (bench/RESULTS.md, 2026-12-05).
constexpr int64_t kReassociateMaxElements = 8;

// tf32 auto: the fewest radial-MLP rows of a chunk for which the split-TF32 output layer runs (FP32
// cores below). On the H200 (MP-0-medium shape, float32) it makes steps 1.02-1.04x faster at 80,000
// rows (2,048 atoms of fcc Cu) and 1.06-1.08x from 156,000 (4,000 atoms); on an H100, alternated in
// one job, 1.04x at 53,500 (1,372 atoms) and 1.01-1.02x at 34,000 (864 atoms) (bench/RESULTS.md,
// 2026-12-04 and 2026-12-07 (late evening)). Smaller chunks were not measured: FP32 there.
constexpr int64_t kSplitTf32MinRows = 32768;

struct EngineOptions {
  EvaluationPath path = EvaluationPath::Fast;
  Dtype dtype = Dtype::FromModel;
  std::string device = "cpu";  // "cpu", "cuda" (LibTorch's current device) or "cuda:N"
  std::string head;            // a multi-head model's head ("": its default, MaceConfig::default_head)
  // Per-structure inputs of models that embed them (core/system_inputs.h: total_charge, total_spin,
  // elec_temp -> value; keywords charge, spin, elec_temp); absent ones take mace-torch's defaults.
  std::map<std::string, double> system;
  // Fast path, all below.
  int64_t edge_chunk = 0;     // edges per chunk; 0 = chosen by the memory planner
  int64_t atom_chunk = 0;     // atoms per node-stage chunk; 0 = planner
  double memory_bytes = 0;    // working-memory budget; 0 = default (default_memory_budget)
  int device_sharers = 1;     // processes that share the device (or the node's memory, on the CPU): they split its default budget
  ScExecutorKind sc = ScExecutorKind::Auto;  // symmetric-contraction executor
  // Tensor cores for the radial MLP in float32 on CUDA. Auto: its output layer in split TF32
  // (ops/tf32_gemm.h: three TF32 products per float32 one, float32's accuracy) where the
  // device and the layer's shape allow; On: every radial-MLP GEMM in plain TF32 (~1e-3 relative force
  // error, opt-in); Off: FP32 cores only.
  Choice tf32 = Choice::Auto;
  int64_t tf32_split_min_rows = kSplitTf32MinRows;
  // The first interaction per sender element (ops/first_layer.h) where the model allows: On always,
  // Off never, Auto while at most reassociate_max_elements elements are present in the structure
  // (chosen per edge topology; beyond that the per-edge layer is faster, bench/RESULTS.md).
  Choice reassociate = Choice::Auto;
  int64_t reassociate_max_elements = kReassociateMaxElements;
  // Spline: each layer's radial MLP read from a table made at load (ops/radial_spline.h), with its
  // measured error logged; opt-in. radial_intervals: the table's intervals, 0 = the smallest power of
  // two that meets kRadialSplineTolerance for the dtype.
  RadialMode radial = RadialMode::Exact;
  int64_t radial_intervals = 0;
  // One radial-MLP evaluation per pair of reverse edges (ops/radial_pairs.h). Auto: on the CPU and
  // in CUDA-graph steps; in eager GPU steps for chunks of at least kMinPairedChunkEdges, below which
  // the pairing's launches cost more than the halved MLP saves.
  Choice radial_pairs = Choice::Auto;
  // On CUDA: capture a step of one edge chunk and one atom chunk (without a stage timer) in a CUDA
  // graph and replay it while the graph stays in its padded bucket (step/step_graph.h).
  bool cuda_graph = true;
  // On CUDA: the radial MLPs of layers after the first on a second stream beside the other layers'
  // work, in steps that keep their edge states (step/side_stream.h).
  bool side_stream = true;
  // Auto: a step that recomputes in several node blocks (large systems) keeps the owned atoms along
  // a space-filling curve when their positions are known (step/atom_order.h: compact blocks keep their reverse-edge
  // pairs), without a halo exchange through other processes; Off: the caller's order. Outputs are
  // in the caller's order either way.
  Choice atom_order = Choice::Auto;
  bool pad_to_bucket = false;  // pad edges and atoms as for CUDA graphs without one (tests the padding)
  // Messages the engine prints (the memory plan, graph captures); default: none.
  std::function<void(const std::string&)> log;
};

// The automatic table of `radial spline`: errors relative to the largest radial function value and
// slope, per dtype (float32 forces carry ~1e-6 relative error of their own; float64 tables are
// capped at 4,096 intervals, whatever error that leaves, which the load message states).
constexpr double kRadialSplineTolerance32 = 1e-6;
constexpr double kRadialSplineTolerance64 = 1e-10;

// A value the parser refuses; what() is "<key> <value>: <what the key accepts>", for the front end
// to prefix ("Illegal pair_style mace/flash ", "flashmace-bench: ").
class OptionError : public Error {
 public:
  using Error::Error;
};

// Sets option `key` from text. Keys are the pair_style keywords (a command line's --edge-chunk is
// key "edge_chunk"): those of engine_option_keys(). Returns false for any other key; throws
// OptionError for a value the key does not accept.
bool set_engine_option(EngineOptions& options, const std::string& key, const std::string& value);
const std::vector<std::string>& engine_option_keys();

// What each option means on its own is checked by set_engine_option; what only the combination or
// the model decides (tf32 needs float32 on CUDA, sc specialized needs CUDA) throws from
// make_evaluator, naming the fix.
void validate(const EngineOptions& options, const std::string& model_dtype);

// The dtype an evaluation runs in: "float64" or "float32" (the model's when FromModel).
std::string resolved_dtype(const EngineOptions& options, const std::string& model_dtype);

// The default working-memory budget: on the CPU half of the available system memory, on a GPU three
// quarters of the free device memory, when the evaluator is made, divided among the processes that
// share the device (a node's ranks on the CPU; the planner's estimates run 20-75 % above the
// measured peaks, bench/RESULTS.md).
double default_memory_budget(const std::string& device, int sharers = 1);

}  // namespace flashmace
