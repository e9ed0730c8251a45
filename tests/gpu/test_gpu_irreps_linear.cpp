// The fast engine's irreps linear (engine/ops/irreps_linear.h) on CUDA against the CPU, float64 and
// float32, from one row to many: MACE's node linears (multiplicities wider than a tile), stacked
// spans with an input no output reads, separated blocks of one irrep; forward and transpose, also
// added into column ranges of wider tensors. Skipped, and reported as skipped, where no GPU or no
// CUDA kernels exist. The CPU against the reference path: engine/test_irreps_linear.cpp.
#include <gtest/gtest.h>

#include "engine/ops/irreps_linear.h"
#include "engine/test_irreps_linear_support.h"
#include "test_support.h"

namespace flashmace {
namespace {

using testing::Case;
using testing::kF64;
using testing::max_abs;
using testing::weight_count;

// On CUDA against the CPU, from one row to many, multiplicities of MACE's size.
class IrrepsLinearGpuCase : public ::testing::TestWithParam<Case> {};

TEST_P(IrrepsLinearGpuCase, EqualsTheCpu) {
  if (!testing::gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  const Irreps in = Irreps::parse(GetParam().in), out = Irreps::parse(GetParam().out);
  const at::Device cuda(at::kCUDA, 0);
  at::manual_seed(11);
  const at::Tensor w = at::randn({weight_count(in, out)}, kF64);
  for (const int64_t n : {1, 37, 700, 9000}) {
    for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
      const double tolerance = dtype == at::kDouble ? 1e-12 : 1e-4;
      const at::Tensor x = at::randn({n, in.dim()}, kF64), g = at::randn({n, out.dim()}, kF64);
      const IrrepsLinear f(w, in, out), f_gpu(w.to(cuda, dtype), in, out);
      const at::Tensor y = f.forward(x), gx = f.transpose(g);
      const double y_scale = y.abs().max().item<double>(), gx_scale = gx.abs().max().item<double>();
      const at::Tensor xc = x.to(cuda, dtype), gc = g.to(cuda, dtype);
      EXPECT_LT(max_abs(f_gpu.forward(xc).cpu().to(at::kDouble), y), tolerance * y_scale) << n;
      EXPECT_LT(max_abs(f_gpu.transpose(gc).cpu().to(at::kDouble), gx), tolerance * gx_scale) << n;
      // Into column ranges of wider tensors, added to what is there.
      at::Tensor wide = at::full({n, out.dim() + 5}, 3.0, kF64).to(cuda, dtype);
      f_gpu.forward_into(xc, wide.narrow(1, 2, out.dim()), /*accumulate=*/true);
      EXPECT_LT(max_abs(wide.narrow(1, 2, out.dim()).cpu().to(at::kDouble), y + 3.0), tolerance * (y_scale + 3)) << n;
      at::Tensor wide_in = at::ones({n, in.dim() + 3}, kF64).to(cuda, dtype);
      f_gpu.transpose_into(gc, wide_in.narrow(1, 3, in.dim()), /*accumulate=*/true);
      EXPECT_LT(max_abs(wide_in.narrow(1, 3, in.dim()).cpu().to(at::kDouble), gx + 1.0), tolerance * (gx_scale + 1))
          << n;
      EXPECT_EQ(max_abs(wide_in.narrow(1, 0, 3).cpu().to(at::kDouble), at::ones({n, 3}, kF64)), 0.0);  // untouched
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Irreps, IrrepsLinearGpuCase,
    ::testing::Values(Case{"96x0e+70x1o+40x2e", "96x0e+70x1o+40x2e"},  // MACE's node linears, wider than a tile
                      Case{"3x0e+2x0e+4x1o+4x1o+2x2e+1x3o", "5x0e+3x1o+2x2e"},  // stacked spans, a 3o no one reads
                      Case{"2x0e+3x1o+2x0e+1x1o", "4x0e+2x1o"}));               // separated blocks of one irrep

}  // namespace
}  // namespace flashmace
