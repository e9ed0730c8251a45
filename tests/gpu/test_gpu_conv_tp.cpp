// The fused conv TP kernels (engine/kernels/conv_tp_kernels.h through engine/ops/conv_tp_op.h) on
// a CUDA GPU equal the reference path, table-driven and generated (specialised, compiled by NVRTC):
// for the shared reference models' layers, random irreps up to l = 3 and the specialisable layouts
// (also with x and the message sums in ir_mul),
// receiver segments with empty rows, single edges and many edges, x indexed by sender and by
// species, float32 within float32 round-off of float64 (the checks: engine/test_conv_tp_support.h);
// radial rows shared through an index give the expanded radials' results bit for bit; repeated runs
// are bitwise equal. Skipped, and reported as skipped, where no GPU or no CUDA kernels exist. The
// CPU: engine/test_conv_tp.cpp.
#include <gtest/gtest.h>

#include "engine/test_conv_tp_support.h"
#include "test_support.h"

namespace flashmace {
namespace {

using testing::check_layout;
using testing::check_radial_index;
using testing::check_random_layouts;
using testing::check_reference_models;
using testing::ConvTPProblem;
using testing::gpu_kernels_available;
using testing::NamedLayout;
using testing::Results;
using testing::run_kernels;
using testing::specializable_layouts;

TEST(ConvTPKernelsGpu, RadialIndexEqualsExpandedRadialsBitwise) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_radial_index(at::Device(at::kCUDA, 0), false);
}

TEST(ConvTPSpecializedGpu, RadialIndexEqualsExpandedRadialsBitwise) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_radial_index(at::Device(at::kCUDA, 0), true);
}

TEST(ConvTPKernelsGpu, ReferenceModelsMatchReferencePath) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_reference_models(at::Device(at::kCUDA, 0));
}

TEST(ConvTPKernelsGpu, RandomIrrepsMatchReferencePath) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_random_layouts(at::Device(at::kCUDA, 0));
}

TEST(ConvTPSpecializedGpu, MatchesReferencePath) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  uint64_t seed = 5000;
  for (const NamedLayout& l : specializable_layouts())
    check_layout(l.in1, l.sh, l.layout, at::Device(at::kCUDA, 0), seed += 10, l.name, /*specialize=*/true);
}

// x, dx and the message sums in ir_mul (the fast engine's later layers): the same numbers.
TEST(ConvTPSpecializedGpu, IrMulMatchesReferencePath) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  uint64_t seed = 6000;
  for (const NamedLayout& l : specializable_layouts())
    check_layout(l.in1, l.sh, l.layout, at::Device(at::kCUDA, 0), seed += 10, l.name + " ir_mul", true, true);
}

TEST(ConvTPSpecializedGpu, RepeatedRunsAreBitwiseEqual) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  const NamedLayout l = specializable_layouts()[1];
  const ConvTPProblem p =
      testing::convert(testing::make_conv_tp_problem(l.in1, l.sh, l.layout, std::vector<int64_t>(50, 40), 60, 12),
                       at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  const Results a = run_kernels(p, true), b = run_kernels(p, true);
  EXPECT_TRUE(at::equal(a.agg, b.agg));
  EXPECT_TRUE(at::equal(a.dR, b.dR));
  EXPECT_TRUE(at::equal(a.dY, b.dY));
  EXPECT_TRUE(at::equal(a.dx, b.dx));
}

TEST(ConvTPKernelsGpu, RepeatedRunsAreBitwiseEqual) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  const Irreps in1 = Irreps::parse("64x0e+64x1o+64x2e"), sh = Irreps::spherical_harmonics(3);
  const ConvTPLayout layout = conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e+3o"));
  const ConvTPProblem p =
      testing::convert(testing::make_conv_tp_problem(in1, sh, layout, std::vector<int64_t>(50, 40), 3, 11),
                       at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  const Results a = run_kernels(p), b = run_kernels(p);
  EXPECT_TRUE(at::equal(a.agg, b.agg));
  EXPECT_TRUE(at::equal(a.dR, b.dR));
  EXPECT_TRUE(at::equal(a.dY, b.dY));
  EXPECT_TRUE(at::equal(a.dx, b.dx));
}

}  // namespace
}  // namespace flashmace
