#include <torch/csrc/autograd/autograd.h>

#include "core/error.h"
#include "core/structure.h"
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

at::Device parse_device(const std::string& name) {
  if (name == "cpu") return at::kCPU;
  if (name.rfind("cuda", 0) == 0) {
    if (!at::hasCUDA())
      throw Error("Device '" + name + "' requested but this machine has no usable CUDA GPU; use device cpu");
    return at::Device(name);
  }
  throw Error("Unknown device '" + name + "' (use cpu or cuda)");
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

// Energies and edge gradients of one evaluation (mace_spec.md 10.2): node energies (E0 included)
// and g_e = dE/dv_e, both float64 on the model's device.
struct EdgeGradients {
  at::Tensor node_energy;
  double interaction_energy = 0;
  at::Tensor grad;     // [E, 3]
  at::Tensor vectors;  // [E, 3] float64
};

EdgeGradients energy_and_edge_gradients(const MaceParams& p, const GraphTensors& graph, const at::Tensor& vectors,
                                        HaloExchanger* halo, int64_t nlocal, StageTimer* timer) {
  if (timer) timer->start();
  const at::Tensor v = vectors.detach().requires_grad_(true);
  at::Tensor inter = mace_interaction_energy(p, graph, v, nullptr, halo, timer).narrow(0, 0, nlocal);
  EdgeGradients out;
  out.node_energy = (inter + p.atomic_energies.index_select(0, graph.species.narrow(0, 0, nlocal))).to(at::kDouble);
  out.interaction_energy = inter.detach().to(at::kDouble).sum().item<double>();
  at::Tensor grad;
  if (v.size(0) > 0) grad = torch::autograd::grad({inter.sum()}, {v}, {}, false, false, /*allow_unused=*/true)[0];
  out.grad = grad.defined() ? grad.to(at::kDouble) : at::zeros({v.size(0), 3}, v.options().dtype(at::kDouble));
  out.vectors = v.detach().to(at::kDouble);
  if (timer) timer->lap("backward");
  return out;
}

// F_n = sum_{sender=n} g_e - sum_{receiver=n} g_e
at::Tensor scatter_forces(const EdgeGradients& eg, const GraphTensors& graph, int64_t nodes) {
  return at::zeros({nodes, 3}, eg.grad.options())
      .index_add(0, graph.sender, eg.grad)
      .index_add(0, graph.receiver, -eg.grad);
}

// W = -sym(sum_e v_e (x) g_e) (mace_spec.md 10.3)
std::array<double, 9> edge_virial(const EdgeGradients& eg) {
  const at::Tensor vg = at::matmul(eg.vectors.t(), eg.grad);
  const std::vector<double> w = to_host(-0.5 * (vg + vg.t()));
  std::array<double, 9> out{};
  std::copy(w.begin(), w.end(), out.begin());
  return out;
}

}  // namespace

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
  impl_->device = parse_device(options.device);
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
  const EdgeGradients eg = energy_and_edge_gradients(p, in.graph, in.vectors, nullptr, s.size(), impl_->timer);

  Prediction out;
  out.interaction_energy = eg.interaction_energy;
  out.node_energy = to_host(eg.node_energy);
  for (double e : out.node_energy) out.energy += e;
  out.forces = to_host(scatter_forces(eg, in.graph, s.size()));
  out.virial = edge_virial(eg);
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
  const EdgeGradients eg =
      energy_and_edge_gradients(p, graph, vectors_tensor(v, p.options), halo, g.nlocal, impl_->timer);

  LocalPrediction out;
  out.node_energy = to_host(eg.node_energy);
  for (double e : out.node_energy) out.energy += e;
  out.forces = to_host(scatter_forces(eg, graph, g.ntotal()));
  out.virial = edge_virial(eg);
  if (atom_virial) {
    // Per edge -v (x) g in LAMMPS's Voigt order, half to each end of the edge.
    const at::Tensor w = -eg.vectors.unsqueeze(2) * eg.grad.unsqueeze(1);  // [E, 3, 3]
    const at::Tensor voigt =
        at::stack({w.select(1, 0).select(1, 0), w.select(1, 1).select(1, 1), w.select(1, 2).select(1, 2),
                   0.5 * (w.select(1, 0).select(1, 1) + w.select(1, 1).select(1, 0)),
                   0.5 * (w.select(1, 0).select(1, 2) + w.select(1, 2).select(1, 0)),
                   0.5 * (w.select(1, 1).select(1, 2) + w.select(1, 2).select(1, 1))},
                  1);
    const at::Tensor half = 0.5 * voigt;
    out.atom_virial = to_host(
        at::zeros({g.ntotal(), 6}, half.options()).index_add(0, graph.sender, half).index_add(0, graph.receiver, half));
  }
  return out;
}

}  // namespace flashmace
