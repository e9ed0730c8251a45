#include <torch/csrc/autograd/autograd.h>

#include "core/error.h"
#include "core/structure.h"
#include "model/reference_model_impl.h"

namespace flashmace {

std::vector<int64_t> element_indices(const MaceConfig& config, const Structure& s) {
  std::vector<int64_t> out(s.size());
  for (int i = 0; i < s.size(); ++i) {
    const int idx = config.element_index(s.atomic_numbers[i]);
    if (idx < 0) {
      std::string known;
      for (int z : config.atomic_numbers) known += std::string(known.empty() ? "" : " ") + element_symbol(z);
      throw Error("Atom " + std::to_string(i) + " is " + element_symbol(s.atomic_numbers[i]) + " (Z=" +
                  std::to_string(s.atomic_numbers[i]) + "), which the model does not know (it has: " + known + ")");
    }
    out[i] = idx;
  }
  return out;
}

namespace {

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

}  // namespace

EdgeInputs make_edge_inputs(const MaceParams& params, const Structure& s, const Graph& g) {
  const at::Device device = params.options.device();
  EdgeInputs in;
  in.graph.species = long_tensor(element_indices(params.config, s), device);
  in.graph.sender = long_tensor(g.sender, device);
  in.graph.receiver = long_tensor(g.receiver, device);
  // Edge vectors in float64 on the host side, then cast: x[receiver] - x[sender] + S @ cell.
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
  in.vectors = at::tensor(v, at::TensorOptions().dtype(at::kDouble)).reshape({E, 3}).to(params.options);
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

Prediction ReferenceModel::evaluate(const Structure& s) const {
  return evaluate(s, build_neighbor_list(s, config().r_max));
}

Prediction ReferenceModel::evaluate(const Structure& s, const Graph& g) const {
  check_structure(s);
  const MaceParams& p = impl_->params;
  EdgeInputs in = make_edge_inputs(p, s, g);
  const at::Tensor v = in.vectors.detach().requires_grad_(true);
  const at::Tensor inter = mace_interaction_energy(p, in.graph, v, nullptr);
  const at::Tensor node_energy = (inter + p.atomic_energies.index_select(0, in.graph.species)).to(at::kDouble);

  const int64_t n = s.size();
  at::Tensor grad = at::zeros_like(v);
  if (g.num_edges() > 0) grad = torch::autograd::grad({inter.sum()}, {v}, {}, false, false, true)[0];
  if (!grad.defined()) grad = at::zeros_like(v);
  grad = grad.to(at::kDouble);
  const at::Tensor vd = v.detach().to(at::kDouble);
  // mace_spec.md 10.2: F_n = sum_{sender=n} g_e - sum_{receiver=n} g_e
  const at::Tensor forces =
      at::zeros({n, 3}, grad.options()).index_add(0, in.graph.sender, grad).index_add(0, in.graph.receiver, -grad);
  // mace_spec.md 10.3: W = -sym(sum_e v_e (x) g_e)
  const at::Tensor vg = at::matmul(vd.t(), grad);
  const at::Tensor virial = -0.5 * (vg + vg.t());

  Prediction out;
  const at::Tensor ne = node_energy.detach().cpu().contiguous();
  out.node_energy.assign(ne.data_ptr<double>(), ne.data_ptr<double>() + n);
  out.energy = ne.sum().item<double>();
  const at::Tensor fc = forces.cpu().contiguous();
  out.forces.assign(fc.data_ptr<double>(), fc.data_ptr<double>() + 3 * n);
  const at::Tensor wc = virial.cpu().contiguous();
  std::copy(wc.data_ptr<double>(), wc.data_ptr<double>() + 9, out.virial.begin());
  if (s.periodic()) {
    const double vol = s.volume();
    for (int k = 0; k < 9; ++k) out.stress[k] = -out.virial[k] / vol;
  }
  const at::Tensor gc = grad.cpu().contiguous();
  out.edge_gradient.assign(gc.data_ptr<double>(), gc.data_ptr<double>() + gc.numel());
  return out;
}

}  // namespace flashmace
