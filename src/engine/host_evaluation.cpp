#include "engine/host_evaluation.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "core/error.h"
#include "core/host_transfers.h"

namespace flashmace {

namespace {

int64_t bytes_of(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

std::vector<double> to_host(const at::Tensor& t) {
  if (!t.is_cpu()) count_to_host(bytes_of(t));
  const at::Tensor c = t.to(at::kCPU, at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Device copies of a graph's arrays and the evaluation of it.
struct DeviceGraph {
  at::Tensor species, sender, receiver, vectors;
  at::Tensor positions;  // the nodes' (GraphView::order_positions)
  GraphView view(int64_t nlocal) const {
    GraphView v;
    v.nlocal = nlocal;
    v.ntotal = species.size(0);
    v.nedges = sender.size(0);
    v.species = species.data_ptr<int64_t>();
    v.sender = sender.data_ptr<int64_t>();
    v.receiver = receiver.data_ptr<int64_t>();
    v.vectors = vectors.data_ptr<double>();
    v.order_positions = positions.data_ptr<double>();
    return v;
  }
};

DeviceGraph to_device(const Evaluator& ev, const std::vector<int64_t>& species, const std::vector<int64_t>& sender,
                      const std::vector<int64_t>& receiver, const std::vector<double>& vectors,
                      const std::vector<double>& positions) {
  const at::Device device(ev.device());
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  // Straight from the caller's arrays to the device (no host tensor copy in between: at ten
  // million atoms a copy of the edges is gigabytes); on the CPU the tensors own copies.
  auto copy = [&](const void* data, at::IntArrayRef sizes, const at::TensorOptions& o) {
    const at::Tensor host = at::from_blob(const_cast<void*>(data), sizes, o);
    if (device.is_cpu()) return host.clone();
    count_to_device(bytes_of(host));
    return host.to(device);
  };
  const int64_t E = static_cast<int64_t>(sender.size());
  DeviceGraph g;
  g.species = copy(species.data(), {static_cast<int64_t>(species.size())}, i64);
  g.sender = copy(sender.data(), {E}, i64);
  g.receiver = copy(receiver.data(), {E}, i64);
  g.vectors = copy(vectors.data(), {E, 3}, f64);
  g.positions = copy(positions.data(), {static_cast<int64_t>(species.size()), 3}, f64);
  return g;
}

struct DeviceOutputs {
  at::Tensor energy, node_energy, forces, virial, atom_virial;
  Outputs outputs() {
    Outputs o;
    o.energy = energy.data_ptr<double>();
    o.node_energy = node_energy.data_ptr<double>();
    o.forces = forces.data_ptr<double>();
    o.virial = virial.data_ptr<double>();
    if (atom_virial.defined()) o.atom_virial = atom_virial.data_ptr<double>();
    return o;
  }
};

DeviceOutputs allocate(const Evaluator& ev, int64_t nlocal, int64_t ntotal, bool atom_virial) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble).device(at::Device(ev.device()));
  DeviceOutputs d;
  d.energy = at::zeros({1}, f64);
  d.node_energy = at::zeros({nlocal}, f64);
  d.forces = at::zeros({ntotal, 3}, f64);
  d.virial = at::zeros({9}, f64);
  if (atom_virial) d.atom_virial = at::zeros({ntotal, 6}, f64);
  return d;
}

Request full_request(bool atom_virial) {
  Request r;
  r.forces = r.virial = r.atom_energy = true;
  r.atom_virial = atom_virial;
  return r;
}

std::vector<double> edge_vectors(const Structure& s, const Graph& g) {
  const int64_t E = g.num_edges();
  std::vector<double> v(3 * static_cast<std::size_t>(E));
  at::parallel_for(0, E, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      const int64_t i = g.sender[e], j = g.receiver[e];
      for (int d = 0; d < 3; ++d) {
        double shift = 0;
        for (int k = 0; k < 3; ++k) shift += g.unit_shifts[3 * e + k] * s.cell[3 * k + d];
        v[3 * e + d] = s.positions[3 * j + d] - s.positions[3 * i + d] + shift;
      }
    }
  });
  return v;
}

}  // namespace

struct ResidentGraph::Impl {
  DeviceGraph graph;
  DeviceOutputs outputs;
  int64_t atoms = 0;
};

ResidentGraph::ResidentGraph(const Evaluator& ev, const Structure& s, const Graph& g) : impl_(std::make_unique<Impl>()) {
  check_structure(s);
  impl_->graph = to_device(ev, element_indices(ev.config(), s), g.sender, g.receiver, edge_vectors(s, g), s.positions);
  impl_->outputs = allocate(ev, s.size(), s.size(), false);
  impl_->atoms = s.size();
}

ResidentGraph::~ResidentGraph() = default;

void ResidentGraph::evaluate(Evaluator& ev, HaloExchanger* halo) {
  Request r;
  r.forces = r.virial = true;
  Outputs o = impl_->outputs.outputs();
  o.node_energy = nullptr;
  ev.evaluate(impl_->graph.view(impl_->atoms), halo, r, o);
}

double ResidentGraph::energy() const { return to_host(impl_->outputs.energy)[0]; }

Prediction evaluate_structure(Evaluator& ev, const Structure& s) {
  return evaluate_structure(ev, s, build_neighbor_list(s, ev.cutoff()));
}

Prediction evaluate_structure(Evaluator& ev, const Structure& s, const Graph& g) {
  check_structure(s);
  const DeviceGraph dg =
      to_device(ev, element_indices(ev.config(), s), g.sender, g.receiver, edge_vectors(s, g), s.positions);
  DeviceOutputs d = allocate(ev, s.size(), s.size(), false);
  ev.evaluate(dg.view(s.size()), nullptr, full_request(false), d.outputs());

  Prediction out;
  out.node_energy = to_host(d.node_energy);
  out.energy = to_host(d.energy)[0];
  double e0 = 0;
  for (int z : s.atomic_numbers) e0 += ev.config().atomic_energies[ev.config().element_index(z)];
  out.interaction_energy = out.energy - e0;
  out.forces = to_host(d.forces);
  const std::vector<double> w = to_host(d.virial);
  std::copy(w.begin(), w.end(), out.virial.begin());
  if (s.periodic()) {
    const double vol = s.volume();
    for (int k = 0; k < 9; ++k) out.stress[k] = -out.virial[k] / vol;
  }
  return out;
}

LocalPrediction evaluate_local(Evaluator& ev, const LocalGraph& g, HaloExchanger* halo, bool atom_virial) {
  std::vector<int64_t> species(g.atomic_numbers.size());
  for (std::size_t i = 0; i < species.size(); ++i) {
    species[i] = ev.config().element_index(g.atomic_numbers[i]);
    if (species[i] < 0)
      throw Error("Atom " + std::to_string(i) + " is " + element_symbol(g.atomic_numbers[i]) +
                  ", which the model does not know");
  }
  std::vector<double> v(3 * static_cast<std::size_t>(g.num_edges()));
  for (int e = 0; e < g.num_edges(); ++e)
    for (int d = 0; d < 3; ++d) v[3 * e + d] = g.positions[3 * g.receiver[e] + d] - g.positions[3 * g.sender[e] + d];
  const DeviceGraph dg = to_device(ev, species, g.sender, g.receiver, v, g.positions);
  DeviceOutputs d = allocate(ev, g.nlocal, g.ntotal(), atom_virial);
  ev.evaluate(dg.view(g.nlocal), halo, full_request(atom_virial), d.outputs());

  LocalPrediction out;
  out.node_energy = to_host(d.node_energy);
  out.energy = to_host(d.energy)[0];
  out.forces = to_host(d.forces);
  const std::vector<double> w = to_host(d.virial);
  std::copy(w.begin(), w.end(), out.virial.begin());
  if (atom_virial) out.atom_virial = to_host(d.atom_virial);
  return out;
}

struct ResidentList::Impl {
  int64_t list_id = 0;
  at::Tensor species, sender, receiver, image, positions;
};

HostList host_list(const Evaluator& ev, const Structure& s, double cutoff) {
  const Graph g = build_neighbor_list(s, cutoff);
  HostList l;
  l.nlocal = l.ntotal = s.size();
  l.species.resize(static_cast<std::size_t>(s.size()));
  for (int i = 0; i < s.size(); ++i) {
    l.species[i] = ev.config().element_index(s.atomic_numbers[i]);
    if (l.species[i] < 0)
      throw Error("atom " + std::to_string(i) + " has atomic number " + std::to_string(s.atomic_numbers[i]) +
                  ", which the model was not trained on");
  }
  l.sender = g.sender;
  l.receiver = g.receiver;
  // Graph: v = x_r - x_s + shift . cell; the list: v = x_r - x_s - image . cell.
  l.image.assign(g.unit_shifts.size(), 0);
  for (std::size_t k = 0; k < g.unit_shifts.size(); ++k) l.image[k] = -g.unit_shifts[k];
  return l;
}

ResidentList::ResidentList() : impl_(std::make_unique<Impl>()) {}
ResidentList::~ResidentList() = default;

LocalPrediction ResidentList::evaluate(Evaluator& ev, const HostList& list, int64_t list_id, const double* positions,
                                       const std::array<double, 9>& cell, double min_distance, HaloExchanger* halo,
                                       bool atom_virial) {
  const at::Device device(ev.device());
  Impl& m = *impl_;
  const int64_t F = static_cast<int64_t>(list.sender.size());
  if (list_id == 0 || list_id != m.list_id) {
    const auto i64 = at::TensorOptions().dtype(at::kLong);
    auto upload = [&](const at::Tensor& host) {
      if (!device.is_cpu()) count_to_device(bytes_of(host));
      return host.to(device);
    };
    m.species = upload(at::tensor(list.species, i64));
    m.sender = upload(at::tensor(list.sender, i64));
    m.receiver = upload(at::tensor(list.receiver, i64));
    m.image = upload(at::tensor(list.image, at::TensorOptions().dtype(at::kInt)));
    m.positions = at::empty({list.ntotal, 3}, at::TensorOptions().dtype(at::kDouble).device(device));
    m.list_id = list_id;
  }
  if (!device.is_cpu()) count_to_device(bytes_of(m.positions));
  m.positions.copy_(at::from_blob(const_cast<double*>(positions), {list.ntotal, 3}, at::kDouble));
  GraphView v;
  v.nlocal = list.nlocal;
  v.ntotal = list.ntotal;
  v.nedges = F;
  v.species = m.species.data_ptr<int64_t>();
  v.sender = m.sender.data_ptr<int64_t>();
  v.receiver = m.receiver.data_ptr<int64_t>();
  v.image = m.image.data_ptr<int32_t>();
  v.positions = m.positions.data_ptr<double>();
  v.cell = cell;
  v.list_id = list_id;
  v.min_distance = min_distance;
  DeviceOutputs d = allocate(ev, list.nlocal, list.ntotal, atom_virial);
  ev.evaluate(v, halo, full_request(atom_virial), d.outputs());

  // One copy back: energy, virial, node energies, forces (and per-atom virials).
  std::vector<at::Tensor> parts{d.energy, d.virial, d.node_energy, d.forces.flatten()};
  if (atom_virial) parts.push_back(d.atom_virial.flatten());
  const std::vector<double> all = to_host(at::cat(parts));
  LocalPrediction out;
  auto take = [&, offset = std::size_t{0}](std::size_t n) mutable {
    std::vector<double> r(all.begin() + offset, all.begin() + offset + n);
    offset += n;
    return r;
  };
  out.energy = take(1)[0];
  const std::vector<double> w = take(9);
  std::copy(w.begin(), w.end(), out.virial.begin());
  out.node_energy = take(list.nlocal);
  out.forces = take(3 * static_cast<std::size_t>(list.ntotal));
  if (atom_virial) out.atom_virial = take(6 * static_cast<std::size_t>(list.ntotal));
  return out;
}

}  // namespace flashmace
