// The fast engine's small fused operations on the CPU against independent truth:
// - graph checks (engine/ops/graph_checks.h): equal / unequal int64 arrays (a difference in the last
//   element of the longest array, sizes that differ) and exact negation of paired vectors;
// - per-atom sums (engine/step/atom_sums.h): forces and virial from edge gradients against plain
//   loops over the edges, with padding edges and atoms.
// The checks: engine/test_engine_kernels_support.h. The same on CUDA, and the first layer's CUDA
// kernels: gpu/test_gpu_engine_kernels.cpp.
#include <gtest/gtest.h>

#include "engine/test_engine_kernels_support.h"

namespace flashmace {
namespace {

using testing::check_atom_sums;
using testing::check_equality;

TEST(GraphChecks, EqualityAndNegationOnCpu) { check_equality(at::kCPU); }

TEST(AtomSums, ForcesAndVirialOnCpu) { check_atom_sums(at::kCPU); }

}  // namespace
}  // namespace flashmace
