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

// Edges a[k] and b[k] of `vectors` ([E, 3] float64; a, b [n] int64); b[k] < 0: a[k] has no partner.
struct NegatedPairs {
  at::Tensor vectors, a, b;
};
// Whether vectors[a[k]] == -vectors[b[k]] exactly for every k with b[k] >= 0, in every set (one device,
// one host synchronisation for all of them).
bool all_negated(const std::vector<NegatedPairs>& sets);

}  // namespace flashmace
