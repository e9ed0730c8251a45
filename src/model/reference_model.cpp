#include <torch/csrc/autograd/autograd.h>

#include "core/error.h"
#include "core/structure.h"
#include "model/device.h"
#include "model/edge_outputs.h"
#include "model/reference_model_impl.h"

namespace flashmace {

namespace {

std::vector<int64_t> element_indices_of(const MaceConfig& config, const std::vector<int>& atomic_numbers) {
  std::vector<int64_t> out(atomic_numbers.size());
  for (std::size_t i = 0; i < atomic_numbers.size(); ++i) {
    const int idx = config.element_index(atomic_numbers[i]);
    if (idx < 0) {
      std::string known;
      for (int z : config.atomic_numbers) known += std::string(known.empty() ? "" : " ") + element_symbol(z);
      throw Error("Atom " + std::to_string(i) + " is " + element_symbol(atomic_numbers[i]) + " (Z=" +
                  std::to_string(atomic_numbers[i]) + "), which the model does not know (it has: " + known + ")");
    }
    out[i] = idx;
  }
  return out;
}

at::Tensor long_tensor(const std::vector<int64_t>& v, at::Device device) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(device);
}

at::Tensor vectors_tensor(const std::vector<double>& v, const at::TensorOptions& options) {
  return at::tensor(v, at::TensorOptions().dtype(at::kDouble))
      .reshape({static_cast<int64_t>(v.size() / 3), 3})
      .to(options);
}

std::vector<double> to_host(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kCPU, at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

std::array<double, 9> host_virial(const at::Tensor& w) {
  const std::vector<double> v = to_host(w);
  std::array<double, 9> out{};
  std::copy(v.begin(), v.end(), out.begin());
  return out;
}

}  // namespace

EdgeGradients reference_edge_gradients(const MaceParams& p, const GraphTensors& graph, const at::Tensor& vectors,
                                       HaloExchanger* halo, int64_t nlocal, bool want_grad, StageTimer* timer) {
  if (timer) timer->start();
  const at::Tensor v = vectors.detach().to(p.options).requires_grad_(want_grad);
  at::Tensor inter = mace_interaction_energy(p, graph, v, nullptr, halo, timer).narrow(0, 0, nlocal);
  EdgeGradients out;
  // E0 is added in float64 (float32 models' E0 of ~1000 eV/atom would otherwise lose ~1e-4 eV).
  out.interaction = inter.detach().to(at::kDouble);
  out.node_energy = out.interaction + p.atomic_energies_f64.index_select(0, graph.species.narrow(0, 0, nlocal));
  if (want_grad) {
    at::Tensor grad;
    if (v.size(0) > 0) grad = torch::autograd::grad({inter.sum()}, {v}, {}, false, false, /*allow_unused=*/true)[0];
    out.grad = grad.defined() ? grad.to(at::kDouble) : at::zeros({v.size(0), 3}, v.options().dtype(at::kDouble));
  }
  if (timer) timer->lap("backward");
  return out;
}

std::vector<int64_t> element_indices(const MaceConfig& config, const Structure& s) {
  return element_indices_of(config, s.atomic_numbers);
}

EdgeInputs make_edge_inputs(const MaceParams& params, const Structure& s, const Graph& g) {
  const at::Device device = params.options.device();
  EdgeInputs in;
  in.graph.species = long_tensor(element_indices(params.config, s), device);
  in.graph.sender = long_tensor(g.sender, device);
  in.graph.receiver = long_tensor(g.receiver, device);
  // Edge vectors in float64 on the host, then cast: x[receiver] - x[sender] + S @ cell.
  const int E = g.num_edges();
  std::vector<double> v(3 * static_cast<std::size_t>(E));
  for (int e = 0; e < E; ++e) {
    const int64_t i = g.sender[e], j = g.receiver[e];
    for (int d = 0; d < 3; ++d) {
      double shift = 0;
      for (int k = 0; k < 3; ++k) shift += g.unit_shifts[3 * e + k] * s.cell[3 * k + d];
      v[3 * e + d] = s.positions[3 * j + d] - s.positions[3 * i + d] + shift;
    }
  }
  in.vectors = vectors_tensor(v, params.options);
  return in;
}

ReferenceModel::ReferenceModel(const ModelFile& file, const EvalOptions& options) : impl_(std::make_unique<Impl>()) {
  const std::string dtype = options.dtype.empty() ? file.config().dtype : options.dtype;
  if (dtype != "float64" && dtype != "float32") throw Error("Unknown dtype '" + dtype + "' (use float64 or float32)");
  impl_->device = at::Device(canonical_device(options.device));
  impl_->params = MaceParams::load(file, dtype == "float64" ? at::kDouble : at::kFloat, impl_->device);
}

ReferenceModel::~ReferenceModel() = default;
ReferenceModel::ReferenceModel(ReferenceModel&&) noexcept = default;
ReferenceModel& ReferenceModel::operator=(ReferenceModel&&) noexcept = default;

const MaceConfig& ReferenceModel::config() const { return impl_->params.config; }

void ReferenceModel::set_stage_timer(StageTimer* timer) { impl_->timer = timer; }

Prediction ReferenceModel::evaluate(const Structure& s) const {
  return evaluate(s, build_neighbor_list(s, config().r_max));
}

Prediction ReferenceModel::evaluate(const Structure& s, const Graph& g) const {
  check_structure(s);
  const MaceParams& p = impl_->params;
  const EdgeInputs in = make_edge_inputs(p, s, g);
  const EdgeGradients eg = reference_edge_gradients(p, in.graph, in.vectors, nullptr, s.size(), true, impl_->timer);
  const at::Tensor v64 = in.vectors.to(at::kDouble);

  Prediction out;
  out.node_energy = to_host(eg.node_energy);
  for (double e : out.node_energy) out.energy += e;
  out.interaction_energy = eg.interaction.sum().item<double>();
  out.forces = to_host(forces_from_edge_gradients(eg.grad, in.graph.sender, in.graph.receiver, s.size()));
  out.virial = host_virial(virial_from_edge_gradients(v64, eg.grad));
  if (s.periodic()) {
    const double vol = s.volume();
    for (int k = 0; k < 9; ++k) out.stress[k] = -out.virial[k] / vol;
  }
  out.edge_gradient = to_host(eg.grad);
  return out;
}

LocalPrediction ReferenceModel::evaluate_local(const LocalGraph& g, HaloExchanger* halo, bool atom_virial) const {
  const MaceParams& p = impl_->params;
  const at::Device device = p.options.device();
  GraphTensors graph;
  graph.species = long_tensor(element_indices_of(p.config, g.atomic_numbers), device);
  graph.sender = long_tensor(g.sender, device);
  graph.receiver = long_tensor(g.receiver, device);
  std::vector<double> v(3 * static_cast<std::size_t>(g.num_edges()));
  for (int e = 0; e < g.num_edges(); ++e)
    for (int d = 0; d < 3; ++d) v[3 * e + d] = g.positions[3 * g.receiver[e] + d] - g.positions[3 * g.sender[e] + d];
  const at::Tensor v64 = vectors_tensor(v, p.options.dtype(at::kDouble));
  const EdgeGradients eg = reference_edge_gradients(p, graph, v64, halo, g.nlocal, true, impl_->timer);

  LocalPrediction out;
  out.node_energy = to_host(eg.node_energy);
  for (double e : out.node_energy) out.energy += e;
  out.forces = to_host(forces_from_edge_gradients(eg.grad, graph.sender, graph.receiver, g.ntotal()));
  out.virial = host_virial(virial_from_edge_gradients(v64, eg.grad));
  if (atom_virial)
    out.atom_virial = to_host(atom_virial_from_edge_gradients(v64, eg.grad, graph.sender, graph.receiver, g.ntotal()));
  return out;
}

}  // namespace flashmace
