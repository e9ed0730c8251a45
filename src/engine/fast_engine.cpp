#include "engine/fast_engine.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>

#include "model/e3nn_ops.h"
#include "model/edge_outputs.h"
#include "model/radial.h"
#include "model/symmetric_contraction.h"

namespace flashmace {

namespace {

void lap(StageTimer* timer, const char* stage) {
  if (timer) timer->lap(stage);
}

// The x-gradient of y = e3nn_linear(x, weight, in, out) for the y-gradient g (the transpose of the
// same block matrices; weight offsets in e3nn_linear's order: input blocks outer, output inner).
at::Tensor e3nn_linear_transpose(const at::Tensor& g, const at::Tensor& weight, const Irreps& in, const Irreps& out) {
  const int64_t n = g.size(0);
  const auto gs = split_irreps(g, out);
  std::vector<int> fan(out.size(), 0);
  for (std::size_t i = 0; i < in.size(); ++i)
    for (std::size_t o = 0; o < out.size(); ++o)
      if (in[i].ir == out[o].ir) fan[o] += in[i].mul;
  std::vector<at::Tensor> blocks;
  int64_t offset = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    at::Tensor acc = at::zeros({n, in[i].mul, in[i].ir.dim()}, g.options());
    for (std::size_t o = 0; o < out.size(); ++o) {
      if (in[i].ir != out[o].ir) continue;
      const int64_t numel = static_cast<int64_t>(in[i].mul) * out[o].mul;
      const at::Tensor w = weight.narrow(0, offset, numel).reshape({in[i].mul, out[o].mul});
      offset += numel;
      // [N, mul_out, d] -> [N, d, mul_out] @ [mul_out, mul_in] -> [N, mul_in, d]
      acc.add_(at::matmul(gs[o].transpose(1, 2), w.t()).transpose(1, 2), 1.0 / std::sqrt(static_cast<double>(fan[o])));
    }
    blocks.push_back(acc.reshape({n, acc.size(1) * acc.size(2)}));
  }
  return at::cat(blocks, 1);
}

// Gradients of sum_k <outputs[k], grad_outputs[k]> with respect to `inputs`; zeros where an input
// does not reach the outputs.
std::vector<at::Tensor> vjp(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& grad_outputs,
                            const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> g =
      torch::autograd::grad(outputs, inputs, grad_outputs, /*retain_graph=*/false, /*create_graph=*/false,
                            /*allow_unused=*/true);
  for (std::size_t k = 0; k < g.size(); ++k)
    if (!g[k].defined()) g[k] = at::zeros_like(inputs[k]);
  return g;
}

// Receiver-sorted segment sum of a chunk: rows r0 .. r0 + nrows - 1 of the sum over its edges.
// Deterministic (one reduction per segment, no atomics).
at::Tensor segment_sum(const at::Tensor& values, const at::Tensor& local_receiver, int64_t nrows) {
  const at::Tensor lengths = at::bincount(local_receiver, {}, nrows);
  return at::segment_reduce(values, "sum", lengths, {}, {}, 0, /*unsafe=*/true, at::Scalar(0));
}

// rows[index[e]] += values[e], bitwise reproducible: the chunk's values are first summed per distinct
// row in edge order, then each distinct row is added once (index_add with repeated rows would use
// GPU atomics, whose order varies between runs).
void add_rows_deterministic(at::Tensor& rows, const at::Tensor& index, const at::Tensor& values) {
  if (index.size(0) == 0) return;
  const auto unique = at::_unique2(index, /*sorted=*/true, /*return_inverse=*/true, /*return_counts=*/false);
  const at::Tensor distinct = std::get<0>(unique), inverse = std::get<1>(unique);
  rows.index_add_(0, distinct, index_sum(values, inverse, distinct.size(0)));
}

// The halo exchange on the calling thread. The exchanger works on host float64 rows, so the rows are
// staged through the host.
void exchange(at::Tensor& rows, HaloExchanger* halo, bool forward) {
  if (!halo) return;
  at::Tensor host = rows.to(at::kCPU, at::kDouble, /*non_blocking=*/false, /*copy=*/true).contiguous();
  const int ncols = static_cast<int>(rows.size(1));
  if (forward)
    halo->forward(host.data_ptr<double>(), ncols);
  else
    halo->reverse(host.data_ptr<double>(), ncols);
  rows.copy_(host);
}

// Per-edge messages of one chunk of layer L (mace_spec.md 6): the TP of the senders' up-projected
// features x with the spherical harmonics, weighted by the radial MLP; and the density term.
struct ChunkMessages {
  at::Tensor msg;   // [Ec, dim(mid)]
  at::Tensor dens;  // [Ec, 1] (density blocks only)
};

ChunkMessages chunk_messages(const MaceParams& m, const InteractionParams& L, const at::Tensor& v, const at::Tensor& x,
                             const at::Tensor& z_sender, const at::Tensor& z_receiver) {
  const at::Tensor r = at::linalg_vector_norm(v, 2, {1}, true);
  const at::Tensor sh = m.spherical_harmonics(v);
  const at::Tensor ef = edge_features(m, r, z_sender, z_receiver);
  const at::Tensor R = radial_mlp(ef, L.radial_layers);
  ChunkMessages out;
  out.msg = conv_tensor_product(x, sh, R, L.in, m.sh, L.tp, L.tp_w3j);
  if (L.density) {
    const double nb = static_cast<double>(L.density_weight.size(0));
    out.dens = at::tanh(at::pow(at::matmul(ef, L.density_weight) / std::sqrt(nb), 2));
  }
  return out;
}

// Node stage of layer t for a block of owned atoms (mace_spec.md 6-8): normalise the projected
// message, skip connection, symmetric contraction, product linear, readout.
struct NodeOutputs {
  at::Tensor h;       // [n, dim(out)]
  at::Tensor energy;  // [n] readout
};

NodeOutputs node_stage(const MaceParams& m, int t, const at::Tensor& mlin, const at::Tensor& dens,
                       const at::Tensor& h_in, const at::Tensor& species) {
  const InteractionParams& L = m.layers[t];
  const MaceConfig& c = m.config;
  const int Z = c.num_elements();
  at::Tensor M = L.density ? mlin / (dens.unsqueeze(1) + 1.0) : mlin / L.avg_num_neighbors;
  if (!L.residual) M = element_linear(M, species, L.skip_tp, L.target, Z, L.target);
  const at::Tensor A = at::cat(split_irreps(M, L.target), 2);
  std::vector<at::Tensor> parts;
  for (const auto& cw : L.contractions) parts.push_back(symmetric_contraction(A, species, cw));
  NodeOutputs out;
  out.h = e3nn_linear(at::cat(parts, 1), L.product_linear, L.out, L.out);
  if (L.residual) out.h = out.h + element_linear(h_in, species, L.skip_tp, L.in, Z, L.out);
  const bool last = t == c.num_interactions - 1;
  out.energy = readout(L, out.h, c.channels(), last, Irreps::parse(c.mlp_irreps)).squeeze(1);
  return out;
}

// One chunk of edges [begin, begin + count) in receiver order, with the receiver rows it touches.
struct EdgeChunk {
  int64_t begin = 0, count = 0;
  int64_t row0 = 0, nrows = 0;
};

std::vector<EdgeChunk> edge_chunks(const at::Tensor& receiver_sorted, int64_t chunk) {
  const int64_t E = receiver_sorted.size(0);
  std::vector<EdgeChunk> chunks;
  if (E == 0) return chunks;
  const at::Tensor first = at::arange(0, E, chunk, receiver_sorted.options());
  const at::Tensor last = at::clamp_max(first + (chunk - 1), E - 1);
  // One small device->host copy per step: the receiver rows at the chunk boundaries.
  const at::Tensor rows = at::stack({receiver_sorted.index_select(0, first), receiver_sorted.index_select(0, last)})
                              .to(at::kCPU)
                              .contiguous();
  const int64_t n = first.size(0);
  const int64_t* r = rows.data_ptr<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    EdgeChunk c;
    c.begin = k * chunk;
    c.count = std::min(chunk, E - c.begin);
    c.row0 = r[k];
    c.nrows = r[n + k] - r[k] + 1;
    chunks.push_back(c);
  }
  return chunks;
}

// A chunk's inputs and outputs kept from the forward to the backward pass (no-recompute mode).
struct KeptChunk {
  std::vector<at::Tensor> inputs;   // leaves that require grad
  std::vector<at::Tensor> outputs;  // with their autograd graph
};

}  // namespace

FastEngine::FastEngine(MaceParams params, EngineSettings settings) : p_(std::move(params)), settings_(std::move(settings)) {
  const MaceConfig& c = p_.config;
  const int Z = c.num_elements();
  const InteractionParams& L0 = p_.layers[0];
  h0_table_ = p_.node_embedding / std::sqrt(static_cast<double>(Z));
  hu0_table_ = e3nn_linear(h0_table_, L0.linear_up, L0.in, L0.in);

  // Working-set estimates per edge and per atom, from the shapes (element size x live tensors).
  const double s = static_cast<double>(at::elementSize(p_.options.dtype().toScalarType()));
  costs_.num_layers = c.num_interactions;
  for (const InteractionParams& L : p_.layers) {
    double radial = 0;
    for (const auto& w : L.radial_layers) radial += static_cast<double>(w.size(1));
    const double mid = L.tp.mid.dim(), W = L.tp.weight_numel, in = L.in.dim();
    costs_.bytes_per_edge = std::max(costs_.bytes_per_edge, s * (6 * mid + 4 * W + 3 * in + 4 * radial + 64));
    double sc = 0;
    const double C = c.channels();
    for (const auto& cw : L.contractions) {
      const at::Tensor& top = cw.U.back();
      const double K = static_cast<double>(top.size(-2)), P = static_cast<double>(top.size(-1));
      sc += C * (K * P + static_cast<double>(top.numel()) / P / K);
    }
    const double target = L.target.dim(), out = L.out.dim();
    costs_.bytes_per_atom = std::max(costs_.bytes_per_atom, s * (4 * sc + 6 * target + 6 * out + 4 * in));
    costs_.resident_per_atom += s * (3 * in + 2 * target + 2);
  }
  costs_.resident_per_atom += 8 * 8;  // float64 energies and bookkeeping
}

void FastEngine::update_plan(int64_t atoms, int64_t edges) {
  if (atoms == planned_atoms_ && edges == planned_edges_) return;
  const std::string device = p_.options.device().str();
  const double budget = settings_.memory_bytes > 0 ? settings_.memory_bytes : default_memory_budget(device);
  const MemoryPlan plan =
      plan_memory(costs_, atoms, edges, budget, settings_.edge_chunk, settings_.atom_chunk);
  // Printed when the mode or the chunk sizes change, not at every new atom or edge count (LAMMPS
  // changes them at every neighbour-list rebuild); whole-step plans differ only in their sizes.
  const bool changed = planned_atoms_ < 0 || plan.recompute != plan_.recompute ||
                       (plan.recompute && (plan.edge_chunk != plan_.edge_chunk || plan.atom_chunk != plan_.atom_chunk));
  plan_ = plan;
  planned_atoms_ = atoms;
  planned_edges_ = edges;
  if (changed && settings_.log) settings_.log(plan_.describe(atoms, edges));
}

EngineResult FastEngine::run(const GraphTensors& g, const at::Tensor& vectors64, int64_t nlocal, HaloExchanger* halo,
                             bool want_grad) {
  const MaceConfig& c = p_.config;
  const int T = c.num_interactions;
  const int64_t ntotal = g.species.size(0);
  const int64_t E = g.sender.size(0);
  update_plan(ntotal, E);
  const bool keep = want_grad && !plan_.recompute;
  if (timer_) timer_->start();

  // Edges in receiver order (stable, so equal receivers keep the caller's order).
  const auto sorted = at::sort(g.receiver, /*stable=*/true, 0, false);
  const at::Tensor receiver = std::get<0>(sorted), order = std::get<1>(sorted);
  const at::Tensor sender = g.sender.index_select(0, order);
  const at::Tensor v = vectors64.index_select(0, order).to(p_.options);
  const at::Tensor z_node = p_.atomic_numbers.index_select(0, g.species);
  const at::Tensor z_sender = z_node.index_select(0, sender), z_receiver = z_node.index_select(0, receiver);
  const at::Tensor species_sender = g.species.index_select(0, sender);
  const at::Tensor species_local = g.species.narrow(0, 0, nlocal);
  const std::vector<EdgeChunk> chunks = edge_chunks(receiver, plan_.edge_chunk);
  const int64_t achunk = plan_.atom_chunk;
  lap(timer_, "graph");

  struct LayerState {
    at::Tensor h;     // [ntotal, dim(in)] input features (t > 0)
    at::Tensor hu;    // [ntotal, dim(in)] their linear_up (t > 0)
    at::Tensor mlin;  // [nlocal, dim(target)] projected message sum
    at::Tensor dens;  // [nlocal] density sum (density blocks)
    std::vector<KeptChunk> edges, nodes;
  };
  std::vector<LayerState> layers(T);
  at::Tensor energy = at::zeros({nlocal}, p_.options);
  std::vector<KeptChunk> zbl_kept;

  auto chunk_slice = [&](const at::Tensor& t, const EdgeChunk& ch) { return t.narrow(0, ch.begin, ch.count); };
  auto local_rows = [&](const EdgeChunk& ch) { return chunk_slice(receiver, ch) - ch.row0; };

  // ---- forward -------------------------------------------------------------------------------
  {
    const c10::AutoGradMode grad_mode(keep);
    if (p_.zbl) {
      for (const EdgeChunk& ch : chunks) {
        at::Tensor vc = chunk_slice(v, ch);
        if (keep) vc = vc.detach().requires_grad_(true);
        const at::Tensor r = at::linalg_vector_norm(vc, 2, {1}, true);
        const at::Tensor e =
            zbl_edge_energy(r, chunk_slice(z_sender, ch), chunk_slice(z_receiver, ch), p_.zbl_params).squeeze(1);
        energy.narrow(0, ch.row0, ch.nrows).add_(segment_sum(e.detach(), local_rows(ch), ch.nrows));
        if (keep) zbl_kept.push_back({{vc}, {e}});
      }
    }
    at::Tensor h_local;  // [nlocal, dim(out)] of the previous layer
    for (int t = 0; t < T; ++t) {
      const InteractionParams& L = p_.layers[t];
      LayerState& S = layers[t];
      if (t > 0) {
        S.h = at::zeros({ntotal, L.in.dim()}, p_.options);
        S.h.narrow(0, 0, nlocal).copy_(h_local);
        lap(timer_, "nodes_forward");
        exchange(S.h, halo, /*forward=*/true);
        lap(timer_, "halo_exchange");
        S.hu = e3nn_linear(S.h, L.linear_up, L.in, L.in);
      }
      S.mlin = at::zeros({nlocal, L.target.dim()}, p_.options);
      if (L.density) S.dens = at::zeros({nlocal}, p_.options);
      for (const EdgeChunk& ch : chunks) {
        const at::Tensor send = chunk_slice(sender, ch);
        at::Tensor vc = chunk_slice(v, ch);
        at::Tensor x = t == 0 ? hu0_table_.index_select(0, chunk_slice(species_sender, ch)) : S.hu.index_select(0, send);
        if (keep) {
          vc = vc.detach().requires_grad_(true);
          if (t > 0) x = x.detach().requires_grad_(true);
        }
        const ChunkMessages cm = chunk_messages(p_, L, vc, x, chunk_slice(z_sender, ch), chunk_slice(z_receiver, ch));
        const at::Tensor rows = local_rows(ch);
        const at::Tensor partial = segment_sum(cm.msg.detach(), rows, ch.nrows);
        S.mlin.narrow(0, ch.row0, ch.nrows).add_(e3nn_linear(partial, L.linear, L.tp.mid, L.target));
        if (L.density)
          S.dens.narrow(0, ch.row0, ch.nrows).add_(segment_sum(cm.dens.detach().squeeze(1), rows, ch.nrows));
        if (keep) {
          KeptChunk k{{vc}, {cm.msg}};
          if (t > 0) k.inputs.push_back(x);
          if (L.density) k.outputs.push_back(cm.dens);
          S.edges.push_back(std::move(k));
        }
      }
      lap(timer_, "edges_forward");
      h_local = at::empty({nlocal, L.out.dim()}, p_.options);
      for (int64_t a0 = 0; a0 < nlocal; a0 += achunk) {
        const int64_t na = std::min(achunk, nlocal - a0);
        const at::Tensor sp = species_local.narrow(0, a0, na);
        at::Tensor ml = S.mlin.narrow(0, a0, na), dn = L.density ? S.dens.narrow(0, a0, na) : at::Tensor();
        at::Tensor hin = t == 0 ? h0_table_.index_select(0, sp) : S.h.narrow(0, a0, na);
        if (keep) {
          ml = ml.detach().requires_grad_(true);
          if (L.density) dn = dn.detach().requires_grad_(true);
          if (t > 0) hin = hin.detach().requires_grad_(true);
        }
        const NodeOutputs no = node_stage(p_, t, ml, dn, hin, sp);
        h_local.narrow(0, a0, na).copy_(no.h.detach());
        energy.narrow(0, a0, na).add_(no.energy.detach());
        if (keep) {
          KeptChunk k{{ml}, {no.h, no.energy}};
          if (L.density) k.inputs.push_back(dn);
          if (t > 0) k.inputs.push_back(hin);
          S.nodes.push_back(std::move(k));
        }
      }
      lap(timer_, "nodes_forward");
    }
  }

  EngineResult result;
  result.node_energy = (c.scale * energy + c.shift).to(at::kDouble) + p_.atomic_energies_f64.index_select(0, species_local);
  if (!want_grad) return result;

  // ---- backward: layers in reverse, chunks recomputed (or kept), exchanges on this thread ----
  const c10::AutoGradMode grad_mode(true);
  at::Tensor grad_v = at::zeros_like(v);
  at::Tensor gh;  // d(E)/d(h_local of layer t), [nlocal, dim(out_t)]
  for (int t = T - 1; t >= 0; --t) {
    const InteractionParams& L = p_.layers[t];
    LayerState& S = layers[t];
    if (!gh.defined()) gh = at::zeros({nlocal, L.out.dim()}, p_.options);
    at::Tensor dmlin = at::empty_like(S.mlin);
    at::Tensor ddens = L.density ? at::empty_like(S.dens) : at::Tensor();
    at::Tensor dh = t > 0 ? at::zeros({ntotal, L.in.dim()}, p_.options) : at::Tensor();
    for (int64_t a0 = 0, k = 0; a0 < nlocal; a0 += achunk, ++k) {
      const int64_t na = std::min(achunk, nlocal - a0);
      KeptChunk chunk;
      if (keep) {
        chunk = std::move(S.nodes[k]);
      } else {
        const at::Tensor sp = species_local.narrow(0, a0, na);
        chunk.inputs.push_back(S.mlin.narrow(0, a0, na).detach().requires_grad_(true));
        if (L.density) chunk.inputs.push_back(S.dens.narrow(0, a0, na).detach().requires_grad_(true));
        if (t > 0) chunk.inputs.push_back(S.h.narrow(0, a0, na).detach().requires_grad_(true));
        const at::Tensor dn = L.density ? chunk.inputs[1] : at::Tensor();
        const at::Tensor hin = t == 0 ? h0_table_.index_select(0, sp) : chunk.inputs.back();
        const NodeOutputs no = node_stage(p_, t, chunk.inputs[0], dn, hin, sp);
        chunk.outputs = {no.h, no.energy};
      }
      const std::vector<at::Tensor> gi =
          vjp(chunk.outputs, {gh.narrow(0, a0, na), at::full({na}, c.scale, p_.options)}, chunk.inputs);
      dmlin.narrow(0, a0, na).copy_(gi[0]);
      if (L.density) ddens.narrow(0, a0, na).copy_(gi[1]);
      if (t > 0) dh.narrow(0, a0, na).add_(gi.back());
    }
    S.nodes.clear();
    lap(timer_, "nodes_backward");

    at::Tensor dhu = t > 0 ? at::zeros({ntotal, L.in.dim()}, p_.options) : at::Tensor();
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      const EdgeChunk& ch = chunks[k];
      const at::Tensor send = chunk_slice(sender, ch);
      KeptChunk chunk;
      if (keep) {
        chunk = std::move(S.edges[k]);
      } else {
        chunk.inputs.push_back(chunk_slice(v, ch).detach().requires_grad_(true));
        at::Tensor x = t == 0 ? hu0_table_.index_select(0, chunk_slice(species_sender, ch)) : S.hu.index_select(0, send);
        if (t > 0) chunk.inputs.push_back(x.requires_grad_(true));
        const ChunkMessages cm =
            chunk_messages(p_, L, chunk.inputs[0], x, chunk_slice(z_sender, ch), chunk_slice(z_receiver, ch));
        chunk.outputs = {cm.msg};
        if (L.density) chunk.outputs.push_back(cm.dens);
      }
      // Split projection, transposed: the chunk's rows of d(aggregate) from d(projected message).
      const at::Tensor rows = local_rows(ch);
      const at::Tensor dagg = e3nn_linear_transpose(dmlin.narrow(0, ch.row0, ch.nrows), L.linear, L.tp.mid, L.target);
      std::vector<at::Tensor> gout = {dagg.index_select(0, rows)};
      if (L.density) gout.push_back(ddens.narrow(0, ch.row0, ch.nrows).index_select(0, rows).unsqueeze(1));
      const std::vector<at::Tensor> gi = vjp(chunk.outputs, gout, chunk.inputs);
      grad_v.narrow(0, ch.begin, ch.count).add_(gi[0]);
      if (t > 0) add_rows_deterministic(dhu, send, gi[1]);
    }
    S.edges.clear();
    lap(timer_, "edges_backward");

    if (t > 0) {
      dh.add_(e3nn_linear_transpose(dhu, L.linear_up, L.in, L.in));
      exchange(dh, halo, /*forward=*/false);
      lap(timer_, "halo_exchange");
      gh = dh.narrow(0, 0, nlocal);
    }
  }
  if (p_.zbl) {
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      const EdgeChunk& ch = chunks[k];
      KeptChunk chunk;
      if (keep) {
        chunk = std::move(zbl_kept[k]);
      } else {
        chunk.inputs.push_back(chunk_slice(v, ch).detach().requires_grad_(true));
        const at::Tensor r = at::linalg_vector_norm(chunk.inputs[0], 2, {1}, true);
        chunk.outputs.push_back(
            zbl_edge_energy(r, chunk_slice(z_sender, ch), chunk_slice(z_receiver, ch), p_.zbl_params).squeeze(1));
      }
      const std::vector<at::Tensor> gi =
          vjp(chunk.outputs, {at::full({ch.count}, c.scale, p_.options)}, chunk.inputs);
      grad_v.narrow(0, ch.begin, ch.count).add_(gi[0]);
    }
    lap(timer_, "edges_backward");
  }
  result.grad = at::zeros({E, 3}, vectors64.options()).index_copy_(0, order, grad_v.to(at::kDouble));
  return result;
}

}  // namespace flashmace
