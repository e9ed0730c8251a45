#include "engine/evaluator.h"

#include <ATen/record_function.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/host_transfers.h"
#include "core/system_inputs.h"
#include "engine/cpu_buffer_cache.h"
#include "engine/evaluation_trace.h"
#include "engine/step/fast_engine.h"
#include "model/device.h"
#include "model/edge_outputs.h"
#include "model/reference_model_impl.h"

namespace flashmace {

namespace {

// Caller memory as tensors (no copies): the view's pointers live on `device`.
GraphTensors wrap_graph(const GraphView& g, const at::Device& device) {
  const auto i64 = at::TensorOptions().dtype(at::kLong).device(device);
  auto wrap = [&](const int64_t* p, int64_t n) {
    return n == 0 ? at::empty({0}, i64) : at::from_blob(const_cast<int64_t*>(p), {n}, i64);
  };
  GraphTensors t;
  t.species = wrap(g.species, g.ntotal);
  t.sender = wrap(g.sender, g.nedges);
  t.receiver = wrap(g.receiver, g.nedges);
  return t;
}

at::Tensor wrap_doubles(const double* p, std::initializer_list<int64_t> shape, const at::Device& device) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble).device(device);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n == 0 ? at::empty(shape, f64) : at::from_blob(const_cast<double*>(p), shape, f64);
}

void check_view(const GraphView& g, const Outputs& out, const Request& req) {
  if (g.nlocal < 0 || g.ntotal < g.nlocal || g.nedges < 0)
    throw Error("Invalid graph: nlocal " + std::to_string(g.nlocal) + ", ntotal " + std::to_string(g.ntotal) +
                ", nedges " + std::to_string(g.nedges));
  if ((g.ntotal > 0 && !g.species) || (g.nedges > 0 && (!g.sender || !g.receiver || !(g.vectors || g.positions))))
    throw Error("Invalid graph: a null pointer for a non-empty array");
  if (g.list_id != 0 && !g.positions) throw Error("Invalid graph: list_id needs positions (not vectors)");
  const bool atoms = g.ntotal > 0, owned = g.nlocal > 0;
  if ((req.forces && atoms && !out.forces) || (req.virial && !out.virial) ||
      (req.atom_energy && owned && !out.node_energy) || (req.atom_virial && atoms && !out.atom_virial))
    throw Error("Evaluator: an output was requested without a buffer to write it to");
}

// Shared by both paths: writes what was requested into the caller's buffers.
void write_outputs(const EngineResult& r, const GraphView& view, const Request& req, const Outputs& out,
                   const at::Device& device) {
  if (out.energy) wrap_doubles(out.energy, {1}, device).copy_(r.node_energy.sum().reshape({1}));
  if (out.node_energy) wrap_doubles(out.node_energy, {view.nlocal}, device).copy_(r.node_energy);
  if (req.forces) wrap_doubles(out.forces, {view.ntotal, 3}, device).copy_(r.forces);
  if (req.virial) wrap_doubles(out.virial, {3, 3}, device).copy_(r.virial);
  if (req.atom_virial) wrap_doubles(out.atom_virial, {view.ntotal, 6}, device).copy_(r.atom_virial);
}

EngineRequest engine_request(const Request& req) {
  EngineRequest e;
  e.forces = req.forces;
  e.virial = req.virial;
  e.atom_virial = req.atom_virial;
  return e;
}

// Both paths share everything but the energy-and-gradient computation.
class TensorEvaluator : public Evaluator {
 public:
  TensorEvaluator(std::string path, const at::Device& device, std::string dtype)
      : path_(std::move(path)), device_(device), dtype_(std::move(dtype)) {}
  std::string device() const override { return device_.str(); }
  std::string dtype() const override { return dtype_; }
  std::string path() const override { return path_; }
  void synchronize() const override { synchronize_stream(device_.str(), stream_); }
  void set_stream(void* cuda_stream) override { stream_ = cuda_stream; }

  void evaluate(const GraphView& view, HaloExchanger* halo, const Request& req, const Outputs& out) override {
    check_view(view, out, req);
    ++evaluations_;
    if (trace_) trace_->before(evaluations_);
    {
      RECORD_USER_SCOPE("flashmace::evaluate");
      evaluate_checked(view, halo, req, out);
    }
    if (trace_) trace_->after(evaluations_, [this] { synchronize(); });
  }

 private:
  void evaluate_checked(const GraphView& view, HaloExchanger* halo, const Request& req, const Outputs& out) {
    const StreamScope on_stream(device_.str(), stream_);
    const CpuBufferCacheScope cpu_buffers(device_.is_cpu());
    const GraphTensors g = wrap_graph(view, device_);
    if (view.positions) {
      ListTensors list{g, list_image(view), view.nlocal};
      const at::Tensor x = wrap_doubles(view.positions, {view.ntotal, 3}, device_);
      write_outputs(compute_list(list, view.list_id, x, list_cell(view), view.min_distance, halo, engine_request(req)),
                    view, req, out, device_);
      return;
    }
    const at::Tensor vectors = wrap_doubles(view.vectors, {view.nedges, 3}, device_);
    const at::Tensor x =
        view.order_positions ? wrap_doubles(view.order_positions, {view.ntotal, 3}, device_) : at::Tensor();
    write_outputs(compute(g, vectors, view.nlocal, halo, engine_request(req), x), view, req, out, device_);
  }

 protected:
  // Float64 tensors on the device, valid until the next call. positions [ntotal, 3]: optional, for
  // the atom order only.
  virtual EngineResult compute(const GraphTensors& g, const at::Tensor& vectors, int64_t nlocal, HaloExchanger* halo,
                               const EngineRequest& want, const at::Tensor& positions) = 0;
  // Positions mode (GraphView::positions): by default the edges within the cutoff, picked here,
  // through compute().
  virtual EngineResult compute_list(const ListTensors& list, int64_t /*list_id*/, const at::Tensor& x,
                                    const at::Tensor& cell, double min_distance, HaloExchanger* halo,
                                    const EngineRequest& want) {
    const EdgesWithin within = edges_within(list, x, cell, config().r_max, min_distance);
    return compute(within.graph, within.vectors, list.nlocal, halo, want, x);
  }

 private:
  // The lattice offsets, the caller's int32 (zeros without image): an MD step between list builds
  // does not read them, so they are not converted here.
  at::Tensor list_image(const GraphView& view) const {
    const auto i32 = at::TensorOptions().dtype(at::kInt).device(device_);
    if (!view.image || view.nedges == 0) return at::zeros({view.nedges, 3}, i32);
    return at::from_blob(const_cast<int32_t*>(view.image), {view.nedges, 3}, i32);
  }
  // The cell on the device, uploaded when it changes.
  const at::Tensor& list_cell(const GraphView& view) {
    if (!cell_.defined() || view.cell != cell_host_) {
      cell_host_ = view.cell;
      if (!device_.is_cpu()) count_to_device(static_cast<int64_t>(sizeof(double)) * 9);
      cell_ = at::tensor(std::vector<double>(view.cell.begin(), view.cell.end()), at::kDouble).reshape({3, 3}).to(device_);
    }
    return cell_;
  }
  std::array<double, 9> cell_host_{};
  at::Tensor cell_;

  std::string path_;
  at::Device device_;
  std::string dtype_;
  void* stream_ = nullptr;
  // (after device_, which it reads)
  const std::unique_ptr<EvaluationTrace> trace_ = EvaluationTrace::from_environment(device_.is_cuda());

 protected:
  int64_t evaluations_ = 0;
};

class ReferenceEvaluator : public TensorEvaluator {
 public:
  ReferenceEvaluator(const ModelFile& file, const at::Device& device, const std::string& dtype)
      : TensorEvaluator("reference", device, dtype),
        params_(MaceParams::load(file, dtype == "float64" ? at::kDouble : at::kFloat, device)) {}
  const MaceConfig& config() const override { return params_.config; }
  void set_stage_timer(StageTimer* timer) override { timer_ = timer; }
  EvaluationCounters counters() const override {
    EvaluationCounters c;
    c.evaluations = evaluations_;
    return c;
  }

 protected:
  EngineResult compute(const GraphTensors& g, const at::Tensor& vectors, int64_t nlocal, HaloExchanger* halo,
                       const EngineRequest& want, const at::Tensor& /*positions*/) override {
    const EdgeGradients eg = reference_edge_gradients(params_, g, vectors, halo, nlocal, want.any(), timer_);
    EngineResult r;
    r.node_energy = eg.node_energy;
    const int64_t ntotal = g.species.size(0);
    if (want.forces) r.forces = forces_from_edge_gradients(eg.grad, g.sender, g.receiver, ntotal);
    if (want.virial) r.virial = virial_from_edge_gradients(vectors, eg.grad);
    if (want.atom_virial) r.atom_virial = atom_virial_from_edge_gradients(vectors, eg.grad, g.sender, g.receiver, ntotal);
    return r;
  }

 private:
  MaceParams params_;
  StageTimer* timer_ = nullptr;
};

class FastEvaluator : public TensorEvaluator {
 public:
  FastEvaluator(const ModelFile& file, const at::Device& device, const std::string& dtype, const EngineOptions& o)
      : TensorEvaluator("fast", device, dtype),
        engine_(file, MaceParams::load(file, dtype == "float64" ? at::kDouble : at::kFloat, device), o) {}
  const MaceConfig& config() const override { return engine_.params().config; }
  std::string sc_executor() const override { return engine_.sc_executor(); }
  std::string tp_executor() const override { return engine_.tp_executor(); }
  void set_stage_timer(StageTimer* timer) override { engine_.set_stage_timer(timer); }
  EvaluationCounters counters() const override {
    EvaluationCounters c = engine_.counters();
    c.evaluations = evaluations_;
    return c;
  }

 protected:
  EngineResult compute(const GraphTensors& g, const at::Tensor& vectors, int64_t nlocal, HaloExchanger* halo,
                       const EngineRequest& want, const at::Tensor& positions) override {
    return engine_.run(g, vectors, nlocal, halo, want, positions);
  }
  EngineResult compute_list(const ListTensors& list, int64_t list_id, const at::Tensor& x, const at::Tensor& cell,
                            double min_distance, HaloExchanger* halo, const EngineRequest& want) override {
    if (list_id == 0) return TensorEvaluator::compute_list(list, list_id, x, cell, min_distance, halo, want);
    return engine_.run_list(list, list_id, x, cell, min_distance, halo, want);
  }

 private:
  FastEngine engine_;
};

}  // namespace

std::unique_ptr<Evaluator> make_evaluator(const ModelFile& model_file, const EngineOptions& o) {
  // Per-structure inputs folded into the model first (for every head), then one head of a multi-head
  // model, as a one-head model (ModelFile::select_head).
  std::string inputs;
  const ModelFile conditioned = fold_system_inputs(model_file, o.system, &inputs);
  if (!inputs.empty() && o.log)
    o.log("per-structure inputs: " + inputs + " (keywords charge, spin, elec_temp; mace-torch's defaults otherwise)");
  const ModelFile file = conditioned.config().num_heads() > 1 || !o.head.empty() ? conditioned.select_head(o.head)
                                                                                 : conditioned;
  validate(o, file.config().dtype);
  const std::string dtype = resolved_dtype(o, file.config().dtype);
  const at::Device device(canonical_device(o.device));
  if (o.path == EvaluationPath::Reference) return std::make_unique<ReferenceEvaluator>(file, device, dtype);
  return std::make_unique<FastEvaluator>(file, device, dtype, o);
}

}  // namespace flashmace
