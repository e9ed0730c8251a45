#pragma once
// MACE's symmetric contraction for one output irrep (mace_spec.md 7.2), evaluated from the
// model file's coupling tensors U_nu and per-element weights W_nu.
#include <ATen/ATen.h>

#include <vector>

namespace flashmace {

struct ContractionWeights {
  int l_out = 0;
  std::vector<at::Tensor> U;        // U[nu-1]: [(2L+1,)] + [K]*nu + [P_nu]
  std::vector<at::Tensor> weights;  // weights[nu-1]: [Z, P_nu, C]
};

// A: [N, C, K]; species: [N] element indices. Returns [N, C * (2L+1)] (channel-major).
at::Tensor symmetric_contraction(const at::Tensor& A, const at::Tensor& species, const ContractionWeights& w);

}  // namespace flashmace
