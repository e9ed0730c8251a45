#include "model/spherical_harmonics.h"

#include <cmath>
#include <vector>

#include "core/wigner3j.h"

namespace flashmace {

namespace {

// Y_l is the l-component of Y_{l-1} (x) u, rescaled to component normalisation: on the unit sphere
// the l-irrep in that product is unique, so this reproduces e3nn's polynomials for every l
// (checked against e3nn's tables). c_l makes sum_m Y_lm^2 = 2l+1.
double recursion_scale(int l) {
  // Evaluate the unscaled recursion at one unit vector; the norm is rotation invariant.
  const double u[3] = {0.0, 1.0, 0.0};
  std::vector<double> y = {std::sqrt(3.0) * u[0], std::sqrt(3.0) * u[1], std::sqrt(3.0) * u[2]};
  for (int k = 2; k <= l; ++k) {
    const auto& c = wigner_3j(k - 1, 1, k);
    const int d1 = 2 * k - 1, d3 = 2 * k + 1;
    std::vector<double> next(d3, 0.0);
    for (int i = 0; i < d1; ++i)
      for (int j = 0; j < 3; ++j)
        for (int m = 0; m < d3; ++m) next[m] += c[(i * 3 + j) * d3 + m] * y[i] * u[j];
    double norm2 = 0;
    for (double v : next) norm2 += v * v;
    const double s = std::sqrt((2.0 * k + 1.0) / norm2);
    for (double& v : next) v *= s;
    if (k == l) return s;
    y = next;
  }
  return 1.0;
}

}  // namespace

SphericalHarmonics::SphericalHarmonics(int lmax, const at::TensorOptions& options) : lmax_(lmax) {
  for (int l = 2; l <= lmax; ++l) {
    const auto& c = wigner_3j(l - 1, 1, l);
    coupling_.push_back(
        recursion_scale(l) *
        at::tensor(c, at::TensorOptions().dtype(at::kDouble)).reshape({2 * l - 1, 3, 2 * l + 1}).to(options));
  }
}

at::Tensor SphericalHarmonics::operator()(const at::Tensor& vectors) const {
  const at::Tensor u = vectors / at::linalg_vector_norm(vectors, 2, {1}, true).clamp_min(1e-12);
  std::vector<at::Tensor> blocks = {at::ones({vectors.size(0), 1}, vectors.options())};
  if (lmax_ >= 1) blocks.push_back(std::sqrt(3.0) * u);
  for (int l = 2; l <= lmax_; ++l) blocks.push_back(at::einsum("ijk,ei,ej->ek", {coupling_[l - 2], blocks.back(), u}));
  return at::cat(blocks, 1);
}

at::Tensor spherical_harmonics(const at::Tensor& vectors, int lmax) {
  return SphericalHarmonics(lmax, vectors.options())(vectors);
}

}  // namespace flashmace
