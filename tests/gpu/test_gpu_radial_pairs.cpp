// The CUDA kernel of the reverse-edge pair sums (engine/ops/radial_pairs.h) equals the CPU's bit for
// bit, float32 and float64, on a ghost-atom domain (rows of two edges and of one). Skipped, and
// reported as skipped, where no GPU or no CUDA kernels exist. The pairing itself and the CPU sums:
// engine/test_radial_pairs.cpp.
#include <gtest/gtest.h>

#include "core/local_graph.h"
#include "engine/ops/radial_pairs.h"
#include "engine/test_radial_pairs_support.h"
#include "test_support.h"

namespace flashmace {
namespace {

using testing::domain_edges;
using testing::Edges;
using testing::ghost_domain;

TEST(RadialPairsGpu, PairRowsSumEqualsTheCpuBitForBit) {
  if (!testing::gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  const LocalGraph lg = ghost_domain(5);
  const Edges g = domain_edges(lg);
  const RadialPairs p = pair_reverse_edges(g.sender, g.receiver, g.vectors, at::kFloat);
  RadialPairs on_gpu = p;
  on_gpu.first = p.first.cuda();
  on_gpu.second = p.second.cuda();
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const at::Tensor values = at::randn({lg.num_edges(), 64}, at::TensorOptions().dtype(dtype));
    EXPECT_TRUE(at::equal(sum_pair_rows(on_gpu, values.cuda()).cpu(), sum_pair_rows(p, values)));
  }
}

}  // namespace
}  // namespace flashmace
