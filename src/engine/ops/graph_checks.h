#pragma once
// Exact checks on device tensors with one host synchronisation each (graph_checks_kernels.h on
// CUDA, ATen on the CPU). Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace flashmace {

// Whether each pair of int64 tensors (one device, equal sizes within a pair) is equal elementwise;
// at most kMaxEqualityRanges pairs.
bool all_equal(const std::vector<std::pair<at::Tensor, at::Tensor>>& pairs);

// Whether vectors[a[k]] == -vectors[b[k]] exactly for every k (vectors [E, 3] float64; a, b [n] int64).
bool all_negated(const at::Tensor& vectors, const at::Tensor& a, const at::Tensor& b);

}  // namespace flashmace
