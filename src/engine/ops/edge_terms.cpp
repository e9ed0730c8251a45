#include "engine/ops/edge_terms.h"

#include <cmath>
#include <utility>

#include "engine/kernels/cpu_gemm.h"
#include "model/e3nn_ops.h"
#include "model/radial.h"

namespace flashmace {

std::pair<at::Tensor, at::Tensor> polynomial_envelope(const at::Tensor& r, const at::Tensor& r_max, int p) {
  const double pd = p, c1 = (pd + 1) * (pd + 2) / 2, c2 = pd * (pd + 2), c3 = pd * (pd + 1) / 2;
  const at::Tensor u = r / r_max;
  const at::Tensor up1 = at::pow(u, p - 1), up = up1 * u;
  const at::Tensor inside = (r < r_max).to(r.scalar_type());
  const at::Tensor value = (1.0 - c1 * up + c2 * up * u - c3 * up * u * u) * inside;
  const at::Tensor slope = (-c1 * pd * up1 + c2 * (pd + 1) * up - c3 * (pd + 2) * up * u) / r_max * inside;
  return {value, slope};
}

at::Tensor InteractionEnvelope::value(const at::Tensor& v) const {
  return polynomial_envelope(at::linalg_vector_norm(v, 2, {1}, true), r_max, p).first;
}

std::pair<at::Tensor, at::Tensor> InteractionEnvelope::value_and_gradient(const at::Tensor& v) const {
  const at::Tensor r = at::linalg_vector_norm(v, 2, {1}, true);
  const auto [f, slope] = polynomial_envelope(r, r_max, p);
  return {f, slope / r * v};
}

namespace {

// The distance the Bessel basis sees (Agnesi / Soft transforms or r itself) and its r-derivative.
std::pair<at::Tensor, at::Tensor> basis_distance(const MaceParams& m, const at::Tensor& r, const at::Tensor& zs,
                                                 const at::Tensor& zr) {
  const std::string& transform = m.config.distance_transform;
  if (transform == "Agnesi") {
    const at::Tensor half = 0.5 * covalent_radius_sum(m.transform_covalent_radii, zs, zr);
    const at::Tensor x = r / half;
    const at::Tensor xq = at::pow(x, m.transform_q), xqp = at::pow(x, m.transform_q - m.transform_p);
    const at::Tensor den = 1.0 + xqp;
    const at::Tensor g = m.transform_a * xq / den;
    const at::Tensor dg = m.transform_a * (m.transform_q * xq / x * den - xq * (m.transform_q - m.transform_p) * xqp / x) /
                          (den * den);
    const at::Tensor f = 1.0 / (1.0 + g);
    return {f, -dg * f * f / half};
  }
  if (transform == "Soft") {
    const at::Tensor rs = covalent_radius_sum(m.transform_covalent_radii, zs, zr);
    const at::Tensor p0 = 0.75 * rs, p1 = (4.0 / 3.0) * rs;
    const at::Tensor k = m.transform_alpha / (p1 - p0);
    const at::Tensor t = at::tanh(k * (r - 0.5 * (p0 + p1)));
    const at::Tensor s = 0.5 * (1.0 + t);
    return {p0 + (r - p0) * s, s + (r - p0) * 0.5 * (1.0 - t * t) * k};
  }
  return {r, at::ones_like(r)};
}

}  // namespace

EdgeGeometry edge_geometry(const MaceParams& m, const at::Tensor& v, const at::Tensor& zs, const at::Tensor& zr) {
  EdgeGeometry g;
  g.r = at::linalg_vector_norm(v, 2, {1}, true);
  g.u = v / g.r.clamp_min(1e-12);
  const int lmax = m.spherical_harmonics.lmax();
  g.y.push_back(at::ones({v.size(0), 1}, v.options()));
  if (lmax >= 1) g.y.push_back(std::sqrt(3.0) * g.u);
  for (int l = 2; l <= lmax; ++l)
    g.y.push_back(at::einsum("ijk,ei,ej->ek", {m.spherical_harmonics.coupling(l), g.y.back(), g.u}));
  g.sh = at::cat(g.y, 1);

  // ef = B(rb) env(r), B(x) = sqrt(2/r_max) sin(w x) / x (mace_spec.md 3.3)
  const auto [rb, drb] = basis_distance(m, g.r, zs, zr);
  // (apply_cutoff false: the interactions apply the envelope, not the features)
  const auto [env, denv] = m.config.apply_cutoff ? polynomial_envelope(g.r, m.r_max, m.cutoff_p)
                                                 : std::make_pair(at::ones_like(g.r), at::zeros_like(g.r));
  const double prefactor = std::sqrt(2.0 / m.config.r_max);
  const at::Tensor wx = rb * m.bessel_weights.unsqueeze(0);
  const at::Tensor sin_wx = at::sin(wx);
  const at::Tensor basis = prefactor * sin_wx / rb;
  const at::Tensor dbasis = prefactor * (wx * at::cos(wx) - sin_wx) / (rb * rb);
  g.ef = basis * env;
  g.def_dr = dbasis * drb * env + basis * denv;
  return g;
}

at::Tensor edge_geometry_vjp(const MaceParams& m, const EdgeGeometry& g, const at::Tensor& grad_sh,
                             const at::Tensor& grad_ef) {
  at::Tensor gu = at::zeros_like(g.u);
  if (grad_sh.defined()) {
    const int lmax = m.spherical_harmonics.lmax();
    std::vector<at::Tensor> gy;
    int64_t offset = 0;
    for (int l = 0; l <= lmax; ++l) {
      gy.push_back(grad_sh.narrow(1, offset, 2 * l + 1).clone());
      offset += 2 * l + 1;
    }
    // Y_l = C_l(Y_{l-1}, u), from the top down.
    for (int l = lmax; l >= 2; --l) {
      const at::Tensor& c = m.spherical_harmonics.coupling(l);
      gy[l - 1].add_(at::einsum("ijk,ej,ek->ei", {c, g.u, gy[l]}));
      gu.add_(at::einsum("ijk,ei,ek->ej", {c, g.y[l - 1], gy[l]}));
    }
    if (lmax >= 1) gu.add_(std::sqrt(3.0) * gy[1]);
  }
  // u = v / r: du/dv = (I - u u^T) / r; and r's own gradient along u.
  at::Tensor gv = (gu - g.u * (g.u * gu).sum(1, true)) / g.r.clamp_min(1e-12);
  if (grad_ef.defined()) gv = gv + (grad_ef * g.def_dr).sum(1, true) * g.u;
  return gv;
}

std::vector<at::Tensor> fold_radial_mlp(const std::vector<at::Tensor>& layers) {
  std::vector<at::Tensor> folded;
  for (std::size_t k = 0; k < layers.size(); ++k)
    folded.push_back((layers[k] * ((k > 0 ? kSiluNormalization : 1.0) /
                                   std::sqrt(static_cast<double>(layers[k].size(0)))))
                         .contiguous());
  return folded;
}

void radial_mlp_preactivations(const std::vector<at::Tensor>& folded, const at::Tensor& ef,
                               std::vector<at::Tensor>* pre) {
  pre->clear();
  for (std::size_t k = 0; k + 1 < folded.size(); ++k) pre->push_back(at::mm(k ? at::silu(pre->back()) : ef, folded[k]));
}

at::Tensor radial_mlp_hidden(const std::vector<at::Tensor>& folded, const at::Tensor& ef, std::vector<at::Tensor>* pre) {
  radial_mlp_preactivations(folded, ef, pre);
  return pre->empty() ? ef : at::silu(pre->back());
}

at::Tensor radial_mlp_forward(const std::vector<at::Tensor>& folded, const at::Tensor& ef, std::vector<at::Tensor>* pre) {
  return at::mm(radial_mlp_hidden(folded, ef, pre), folded.back());
}

at::Tensor radial_mlp_hidden_vjp(const std::vector<at::Tensor>& folded, const std::vector<at::Tensor>& pre,
                                 const at::Tensor& grad_hidden) {
  at::Tensor g = grad_hidden;
  for (std::size_t k = folded.size() - 1; k-- > 0;) g = at::mm(at::silu_backward(g, pre[k]), folded[k].t());
  return g;
}

at::Tensor radial_mm(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType t = a.scalar_type();
  if (!a.is_cpu() || !b.is_cpu() || a.dim() != 2 || b.dim() != 2 || b.scalar_type() != t ||
      (t != at::kFloat && t != at::kDouble) || a.size(1) != b.size(0) ||
      (a.size(0) > 1 && a.size(1) > 1 && a.stride(1) != 1))
    return at::mm(a, b);
  const int64_t M = a.size(0), N = b.size(1), K = a.size(1);
  at::Tensor c = at::empty({M, N}, a.options());
  if (t == at::kFloat)
    cpu_gemm(M, N, K, a.data_ptr<float>(), a.stride(0), b.data_ptr<float>(), b.stride(0), b.stride(1),
             c.data_ptr<float>(), N);
  else
    cpu_gemm(M, N, K, a.data_ptr<double>(), a.stride(0), b.data_ptr<double>(), b.stride(0), b.stride(1),
             c.data_ptr<double>(), N);
  return c;
}

at::Tensor density_forward(const InteractionParams& L, const at::Tensor& ef) {
  const double nb = static_cast<double>(L.density_weight.size(0));
  return at::tanh(at::pow(at::matmul(ef, L.density_weight) / std::sqrt(nb), 2));
}

at::Tensor density_vjp(const InteractionParams& L, const at::Tensor& ef, const at::Tensor& grad_density) {
  const double nb = static_cast<double>(L.density_weight.size(0));
  const at::Tensor s = at::matmul(ef, L.density_weight) / std::sqrt(nb);
  const at::Tensor d = at::tanh(s * s);
  const at::Tensor gs = grad_density * (1.0 - d * d) * 2.0 * s;
  return at::matmul(gs, L.density_weight.t()) / std::sqrt(nb);
}

std::pair<at::Tensor, at::Tensor> zbl_energy_and_derivative(const at::Tensor& r, const at::Tensor& z_sender,
                                                            const at::Tensor& z_receiver, const ZBLParameters& zbl) {
  const at::Tensor zs = z_sender.to(r.scalar_type()).unsqueeze(1);
  const at::Tensor zr = z_receiver.to(r.scalar_type()).unsqueeze(1);
  const at::Tensor a = zbl.a_prefactor * 0.529 / (at::pow(zs, zbl.a_exp) + at::pow(zr, zbl.a_exp));
  const at::Tensor x = r / a;
  const double d[4] = {3.2, 0.9423, 0.4028, 0.2016};  // mace_spec.md 8
  at::Tensor phi = at::zeros_like(r), dphi = at::zeros_like(r);
  for (int i = 0; i < 4; ++i) {
    const at::Tensor term = zbl.c[i] * at::exp(-d[i] * x);
    phi = phi + term;
    dphi = dphi - d[i] * term;
  }
  const at::Tensor k = 14.3996 * zs * zr;
  const at::Tensor v = k / r * phi;
  const at::Tensor dv = k * (-phi / (r * r) + dphi / (a * r));
  const auto [env, denv] =
      polynomial_envelope(r, covalent_radius_sum(zbl.covalent_radii, z_sender, z_receiver), zbl.p);
  return {(0.5 * v * env).squeeze(1), (0.5 * (dv * env + v * denv)).squeeze(1)};
}

}  // namespace flashmace
