#include "engine/ops/nonlinear_radial.h"

#include <tuple>

#include "core/error.h"
#include "engine/ops/edge_terms.h"

namespace flashmace {

namespace {

constexpr double kLayerNormEps = 1e-5;  // torch.nn.LayerNorm's default, as mace-torch's RadialMLP uses

}  // namespace

std::vector<at::Tensor> NonlinearRadialState::tensors() const {
  std::vector<at::Tensor> all = {density_out};
  for (const NormedMlpState* s : {&radial, &density})
    for (const auto* v : {&s->pre, &s->mean, &s->rstd}) all.insert(all.end(), v->begin(), v->end());
  return all;
}

// The first Linear reads [ef, S[sender], T[receiver]]: its columns split into the radial-feature
// block (a GEMM per edge) and the two embedding blocks, folded with the embeddings into per-element
// rows (the bias with the receiver's).
NonlinearRadial::Mlp NonlinearRadial::fold(const NormedMLP& mlp, const at::Tensor& source, const at::Tensor& target,
                                           int64_t n_basis) {
  if (mlp.norm_weight.empty() || mlp.weight.size() != mlp.norm_weight.size() + 1)
    throw Error("NonLinear block: a radial MLP without hidden layers, or without a LayerNorm after each hidden Linear");
  const at::Tensor& w0 = mlp.weight[0];  // [H0, n_basis + 2C]
  const int64_t C = source.size(1);
  if (w0.size(1) != n_basis + 2 * C)
    throw Error("NonLinear block: the radial MLP's first Linear reads " + std::to_string(w0.size(1)) +
                " inputs, not radial features + two embeddings (" + std::to_string(n_basis + 2 * C) + ")");
  Mlp m;
  m.ef_weight = w0.narrow(1, 0, n_basis).t().contiguous();
  m.sender = at::mm(source, w0.narrow(1, n_basis, C).t()).contiguous();
  m.receiver = (at::mm(target, w0.narrow(1, n_basis + C, C).t()) + mlp.bias[0]).contiguous();
  for (std::size_t k = 1; k < mlp.weight.size(); ++k) {
    m.weight.push_back(mlp.weight[k].contiguous());
    m.bias.push_back(mlp.bias[k].contiguous());
  }
  m.norm_weight = mlp.norm_weight;
  m.norm_bias = mlp.norm_bias;
  return m;
}

NonlinearRadial::NonlinearRadial(const MaceParams& model, const InteractionParams& L) {
  if (!model.config.apply_cutoff) envelope_ = InteractionEnvelope{model.r_max, model.cutoff_p};
  const int64_t nb = model.bessel_weights.size(0);
  radial_ = fold(L.radial_net, L.source_embedding, L.target_embedding, nb);
  density_ = fold(L.density_net, L.source_embedding, L.target_embedding, nb);
}

at::Tensor NonlinearRadial::forward_mlp(const Mlp& mlp, const at::Tensor& ef, const at::Tensor& sender,
                                        const at::Tensor& receiver, NormedMlpState* s) {
  at::Tensor y = at::mm(ef, mlp.ef_weight).add_(mlp.sender.index_select(0, sender))
                     .add_(mlp.receiver.index_select(0, receiver));
  s->pre.clear();
  s->mean.clear();
  s->rstd.clear();
  for (std::size_t k = 0; k < mlp.norm_weight.size(); ++k) {
    auto [normed, mean, rstd] =
        at::native_layer_norm(y, {y.size(1)}, mlp.norm_weight[k], mlp.norm_bias[k], kLayerNormEps);
    s->pre.push_back(y);
    s->mean.push_back(mean);
    s->rstd.push_back(rstd);
    y = at::addmm(mlp.bias[k], at::silu(normed), mlp.weight[k].t());
  }
  return y;
}

at::Tensor NonlinearRadial::normalized(const Mlp& mlp, const NormedMlpState& s, std::size_t k) {
  return at::addcmul(mlp.norm_bias[k], (s.pre[k] - s.mean[k]) * s.rstd[k], mlp.norm_weight[k]);
}

at::Tensor NonlinearRadial::backward_mlp(const Mlp& mlp, const NormedMlpState& s, at::Tensor g,
                                         const at::Tensor& last_normed) {
  const std::size_t hidden = mlp.norm_weight.size();
  for (std::size_t k = hidden; k-- > 0;) {
    if (k + 1 < hidden) g = at::mm(g, mlp.weight[k]);  // through Linear k + 1 (weight[k])
    g = at::silu_backward(g, k + 1 == hidden && last_normed.defined() ? last_normed : normalized(mlp, s, k));
    g = std::get<0>(at::native_layer_norm_backward(g, s.pre[k], {s.pre[k].size(1)}, s.mean[k], s.rstd[k],
                                                   mlp.norm_weight[k], mlp.norm_bias[k], {true, false, false}));
  }
  return at::mm(g, mlp.ef_weight.t());
}

std::pair<at::Tensor, at::Tensor> NonlinearRadial::forward(const at::Tensor& ef, const at::Tensor& sender,
                                                           const at::Tensor& receiver, const at::Tensor& vectors,
                                                           NonlinearRadialState* s) const {
  at::Tensor R = forward_mlp(radial_, ef, sender, receiver, &s->radial);
  s->density_out = forward_mlp(density_, ef, sender, receiver, &s->density);
  at::Tensor d = at::tanh(s->density_out * s->density_out);
  if (envelope_) {
    const at::Tensor f = envelope_->value(vectors);
    R.mul_(f);
    d.mul_(f);
  }
  return {R, d};
}

// With the envelope, R = f(r) (a W^T + b) for the last hidden activation a, so dE/df = sum(dR a W^T)
// + dR.b = sum((dR W) a) + dR.b: from the product the backward takes anyway, without R's raw values.
std::pair<at::Tensor, at::Tensor> NonlinearRadial::backward(const NonlinearRadialState& s, const at::Tensor& vectors,
                                                            const at::Tensor& grad_radial,
                                                            const at::Tensor& grad_density) const {
  at::Tensor f, df_dv;
  if (envelope_) std::tie(f, df_dv) = envelope_->value_and_gradient(vectors);
  at::Tensor grad_f;  // dE/df [Ec, 1]
  at::Tensor grad_ef;
  if (grad_radial.defined()) {
    const at::Tensor normed = normalized(radial_, s.radial, radial_.norm_weight.size() - 1);
    at::Tensor g = at::mm(grad_radial, radial_.weight.back());  // dE/d(last activation) before f
    if (envelope_) {
      grad_f = (g * at::silu(normed)).sum(1, true) + at::mv(grad_radial, radial_.bias.back()).unsqueeze(1);
      g = g * f;
    }
    grad_ef = backward_mlp(radial_, s.radial, g, normed);
  }
  if (grad_density.defined()) {
    const at::Tensor& o = s.density_out;
    const at::Tensor t = at::tanh(o * o);
    at::Tensor go = grad_density * (1.0 - t * t) * 2.0 * o;  // dE/do before f
    if (envelope_) {
      grad_f = grad_f.defined() ? grad_f + grad_density * t : grad_density * t;
      go = go * f;
    }
    // Through the output Linear [1, H] to the last hidden activation.
    const at::Tensor gd = backward_mlp(density_, s.density, at::mm(go, density_.weight.back()));
    grad_ef = grad_ef.defined() ? grad_ef + gd : gd;
  }
  return {grad_ef, grad_f.defined() ? grad_f * df_dv : at::Tensor()};
}

}  // namespace flashmace
