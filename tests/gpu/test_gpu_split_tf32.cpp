// The split-TF32 output layer (engine/ops/tf32_gemm.h) against float64 on the CPU: SiLU(pre) W
// keeps float32's accuracy (within a few times cuBLAS's FP32 GEMM on the same operands, far below
// plain TF32's ~3e-4) over widths and row counts of the radial MLPs, repeats bit for bit, and
// declines what it cannot run. Skipped, and reported as skipped, where no GPU or no CUDA kernels
// exist.
#include <gtest/gtest.h>

#include "engine/ops/tf32_gemm.h"
#include "test_support.h"

namespace flashmace {
namespace {

// ||got - want|| / ||want||, want in float64; got must be finite.
double norm_error(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor g = got.cpu().to(at::kDouble);
  EXPECT_TRUE(at::isfinite(g).all().item<bool>());
  return ((g - want).norm() / want.norm()).item<double>();
}

TEST(SplitTf32Gpu, OutputLayerHasFloat32Accuracy) {
  if (!testing::gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA);
  at::manual_seed(11);
  struct Shape {
    int64_t m, k, n;
  };
  for (const Shape s : {Shape{1, 8, 16}, Shape{15, 64, 48}, Shape{129, 64, 1280}, Shape{5000, 64, 512},
                        Shape{300, 128, 80}, Shape{4097, 32, 208}}) {
    const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
    const at::Tensor w = at::randn({s.k, s.n}, f32) / std::sqrt(static_cast<double>(s.k));
    ASSERT_TRUE(SplitTf32Linear::applies(w)) << shape;
    const SplitTf32Linear linear(w);
    const at::Tensor pre = at::randn({s.m, s.k}, f32) * 2;
    const at::Tensor pre64 = pre.cpu().to(at::kDouble), w64 = w.cpu().to(at::kDouble);
    const at::Tensor want = at::mm(at::silu(pre64), w64);
    const at::Tensor got = linear.forward_silu(pre);
    // cuBLAS's FP32 GEMM on float32's SiLU: the accuracy to keep.
    const double fp32 = norm_error(at::mm(at::silu(pre), w), want), err = norm_error(got, want);
    std::printf("%s: split TF32 %.3g, FP32 %.3g\n", shape.c_str(), err, fp32);
    EXPECT_LE(err, std::max(8 * fp32, 2e-7)) << shape;
    EXPECT_LE(err, 3e-6) << shape;
    EXPECT_TRUE(at::equal(linear.forward_silu(pre), got)) << shape;
  }
}

TEST(SplitTf32Gpu, DeclinesWhatItCannotRun) {
  if (!testing::gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA);
  EXPECT_TRUE(SplitTf32Linear::applies(at::zeros({64, 1280}, f32)));
  EXPECT_FALSE(SplitTf32Linear::applies(at::zeros({64, 1280}, f32.dtype(at::kDouble))));
  EXPECT_FALSE(SplitTf32Linear::applies(at::zeros({64, 1280}, at::TensorOptions().dtype(at::kFloat))));
  const SplitTf32Linear linear(at::zeros({64, 128}, f32));
  EXPECT_NE(testing::error_of([&] { linear.forward_silu(at::zeros({10, 32}, f32)); }).find("must be float32 [M, 64]"),
            std::string::npos);
}

}  // namespace
}  // namespace flashmace
