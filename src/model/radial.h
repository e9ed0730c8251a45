#pragma once
// Radial pieces of MACE (mace_spec.md 3.3, 8): Bessel basis, polynomial cutoff envelope, the
// Agnesi and Soft distance transforms, and the ZBL pair repulsion. r: [E, 1].
#include <ATen/ATen.h>

namespace flashmace {

// sqrt(2/r_max) sin(w_k r) / r with w_k = bessel_weights[k] (taken from the model file).
at::Tensor bessel_basis(const at::Tensor& r, const at::Tensor& bessel_weights, double r_max);

// 1 - (p+1)(p+2)/2 u^p + p(p+2) u^(p+1) - p(p+1)/2 u^(p+2), u = r/r_max, zero beyond r_max.
at::Tensor polynomial_cutoff(const at::Tensor& r, const at::Tensor& r_max, int p);

// Per-edge covalent-radius sums: cov[Z_sender] + cov[Z_receiver] ([E, 1]).
at::Tensor covalent_radius_sum(const at::Tensor& covalent_radii, const at::Tensor& z_sender,
                               const at::Tensor& z_receiver);

at::Tensor agnesi_transform(const at::Tensor& r, const at::Tensor& radius_sum, const at::Tensor& q, const at::Tensor& p,
                            const at::Tensor& a);
at::Tensor soft_transform(const at::Tensor& r, const at::Tensor& radius_sum, const at::Tensor& alpha);

struct ZBLParameters {
  at::Tensor c;               // [4]
  at::Tensor covalent_radii;  // indexed by atomic number
  at::Tensor a_exp, a_prefactor;
  int p = 5;
};
// Per-edge ZBL energy 0.5 * V(r) (each pair appears twice in the full list), [E, 1].
at::Tensor zbl_edge_energy(const at::Tensor& r, const at::Tensor& z_sender, const at::Tensor& z_receiver,
                           const ZBLParameters& zbl);

}  // namespace flashmace
