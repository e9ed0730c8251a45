#pragma once
// The per-step checks that decide whether cached graph data still holds (edge_topology.h: the same
// connectivity; radial_pairs.h: every pair's vectors still exact negations), as one CUDA launch
// each: the generic ATen form (an elementwise compare and a single-block reduction per array, then
// logical ands) costs a dozen launches, ~0.1 ms of a 3 ms step at 864 atoms. A kernel clears
// *flag (set to 1 by the caller) on any mismatch. Torch-free: device pointers and a cudaStream_t.
#include <cstdint>

namespace flashmace {

constexpr int kMaxEqualityRanges = 4;

struct EqualityRanges {
  const int64_t* a[kMaxEqualityRanges] = {};
  const int64_t* b[kMaxEqualityRanges] = {};
  int64_t n[kMaxEqualityRanges] = {};
  int count = 0;
};

// a[r][i] == b[r][i] for every range r and i < n[r].
void check_equal_cuda(const EqualityRanges& ranges, int* flag, void* stream);

// v[3 pa[k] + c] == -v[3 pb[k] + c] for k < n with pb[k] >= 0, c < 3 (float64, exact: -0.0 equals 0.0).
void check_negated_cuda(const double* v, const int64_t* pa, const int64_t* pb, int64_t n, int* flag, void* stream);

}  // namespace flashmace
