#pragma once
// Real spherical harmonics in e3nn's convention (normalize=True, normalization="component",
// mace_spec.md 4): [E, 3] vectors -> [E, (lmax+1)^2], blocks l = 0..lmax.
#include <ATen/ATen.h>

#include <vector>

namespace flashmace {

// Holds the recursion's coupling tensors on the target device, built once, so that evaluating
// needs no host-to-device copies.
class SphericalHarmonics {
 public:
  SphericalHarmonics() = default;
  SphericalHarmonics(int lmax, const at::TensorOptions& options);
  at::Tensor operator()(const at::Tensor& vectors) const;
  int lmax() const { return lmax_; }
  // coupling(l) for l >= 2: Y_l[k] = sum_ij coupling(l)[i, j, k] Y_{l-1}[i] u[j] (u the unit vector).
  const at::Tensor& coupling(int l) const { return coupling_[l - 2]; }

 private:
  int lmax_ = 0;
  std::vector<at::Tensor> coupling_;  // coupling_[l - 2]: scaled w3j(l-1, 1, l)
};

// Convenience for one-off use (tests): builds the couplings for the vectors' dtype and device.
at::Tensor spherical_harmonics(const at::Tensor& vectors, int lmax);

}  // namespace flashmace
