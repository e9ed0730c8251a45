#include "model/radial.h"

#include <cmath>

namespace flashmace {

at::Tensor bessel_basis(const at::Tensor& r, const at::Tensor& bessel_weights, double r_max) {
  const double prefactor = std::sqrt(2.0 / r_max);
  return prefactor * at::sin(r * bessel_weights.unsqueeze(0)) / r;
}

at::Tensor polynomial_cutoff(const at::Tensor& r, const at::Tensor& r_max, int p) {
  const double pd = p;
  const at::Tensor u = r / r_max;
  const at::Tensor envelope = 1.0 - (pd + 1.0) * (pd + 2.0) / 2.0 * at::pow(u, p) +
                              pd * (pd + 2.0) * at::pow(u, p + 1) - pd * (pd + 1.0) / 2.0 * at::pow(u, p + 2);
  return envelope * (r < r_max).to(r.scalar_type());
}

at::Tensor covalent_radius_sum(const at::Tensor& covalent_radii, const at::Tensor& z_sender,
                               const at::Tensor& z_receiver) {
  return (covalent_radii.index_select(0, z_sender) + covalent_radii.index_select(0, z_receiver)).unsqueeze(1);
}

at::Tensor agnesi_transform(const at::Tensor& r, const at::Tensor& radius_sum, const at::Tensor& q, const at::Tensor& p,
                            const at::Tensor& a) {
  const at::Tensor x = r / (0.5 * radius_sum);
  return 1.0 / (1.0 + a * at::pow(x, q) / (1.0 + at::pow(x, q - p)));
}

at::Tensor soft_transform(const at::Tensor& r, const at::Tensor& radius_sum, const at::Tensor& alpha) {
  const at::Tensor p0 = 0.75 * radius_sum;
  const at::Tensor p1 = (4.0 / 3.0) * radius_sum;
  const at::Tensor m = 0.5 * (p0 + p1);
  const at::Tensor s = 0.5 * (1.0 + at::tanh(alpha / (p1 - p0) * (r - m)));
  return p0 + (r - p0) * s;
}

at::Tensor zbl_edge_energy(const at::Tensor& r, const at::Tensor& z_sender, const at::Tensor& z_receiver,
                           const ZBLParameters& zbl) {
  const at::Tensor zs = z_sender.to(r.scalar_type()).unsqueeze(1);
  const at::Tensor zr = z_receiver.to(r.scalar_type()).unsqueeze(1);
  const at::Tensor a = zbl.a_prefactor * 0.529 / (at::pow(zs, zbl.a_exp) + at::pow(zr, zbl.a_exp));
  const at::Tensor x = r / a;
  // mace_spec.md 8: screening exponents are fixed; only the prefactors c are stored.
  const double d[4] = {3.2, 0.9423, 0.4028, 0.2016};
  at::Tensor phi = at::zeros_like(r);
  for (int i = 0; i < 4; ++i) phi = phi + zbl.c[i] * at::exp(-d[i] * x);
  const at::Tensor v = 14.3996 * zs * zr / r * phi;
  const at::Tensor cutoff = polynomial_cutoff(r, covalent_radius_sum(zbl.covalent_radii, z_sender, z_receiver), zbl.p);
  return 0.5 * v * cutoff;
}

}  // namespace flashmace
