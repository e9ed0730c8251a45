#pragma once
// Real spherical harmonics in e3nn's convention (normalize=True, normalization="component",
// mace_spec.md 4): [E, 3] vectors -> [E, (lmax+1)^2], blocks l = 0..lmax.
#include <ATen/ATen.h>

namespace flashmace {

at::Tensor spherical_harmonics(const at::Tensor& vectors, int lmax);

}  // namespace flashmace
