#pragma once
// Checks shared by the tests of the fast engine's small fused operations on the CPU
// (engine/test_engine_kernels.cpp) and on CUDA (gpu/test_gpu_engine_kernels.cpp); they report
// through gtest's EXPECTs.
#include <ATen/ATen.h>

namespace flashmace::testing {

// max |a - b| / max(|b|, tiny) over all elements; fails (returns +inf) on a non-finite value.
double relative_error(const at::Tensor& a, const at::Tensor& b);

// The graph checks (engine/ops/graph_checks.h) on `device`: equal / unequal int64 arrays (a
// difference in the last element of the longest array, sizes that differ) and exact negation of
// paired vectors.
void check_equality(const at::Device& device);

// The per-atom sums (engine/step/atom_sums.h) on `device`, float64 and float32: forces and virial
// from edge gradients against plain loops over the edges, with padding edges and atoms.
void check_atom_sums(const at::Device& device);

}  // namespace flashmace::testing
