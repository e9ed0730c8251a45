// On a CUDA GPU: the specialised executor equals the generic CUDA executor, which equals the CPU
// executor (and so the reference SC); the executor choice falls back and explains itself.
// Reported as skipped where no GPU exists, except the test of what happens then.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>

#include "core/model_file.h"
#include "model/device.h"
#include "sc/sc_cpu_executor.h"
#include "sc/sc_cuda_executor.h"
#include "sc/sc_descriptor.h"
#include "sc_test_support.h"
#include "test_support.h"

namespace flashmace {
namespace {

template <typename T>
struct Outputs {
  at::Tensor B, dA;
};

template <typename T>
Outputs<T> run_cuda(const ScCudaExecutor<T>& ex, const at::Tensor& A, const at::Tensor& species, const at::Tensor& dB) {
  const auto cuda = A.options().device(at::kCUDA);
  const at::Tensor a = A.to(cuda).contiguous(), s = species.to(at::kCUDA).contiguous(), db = dB.to(cuda).contiguous();
  at::Tensor B = at::full({A.size(0), dB.size(1)}, std::numeric_limits<double>::quiet_NaN(), cuda);
  at::Tensor dA = at::full_like(a, std::numeric_limits<double>::quiet_NaN());
  // LibTorch's current stream is the legacy default stream here; .cpu() below waits for it.
  ex.forward(a.data_ptr<T>(), s.data_ptr<int64_t>(), A.size(0), B.data_ptr<T>(), nullptr);
  ex.backward(a.data_ptr<T>(), s.data_ptr<int64_t>(), db.data_ptr<T>(), A.size(0), dA.data_ptr<T>(), nullptr);
  return {B.cpu(), dA.cpu()};
}

template <typename T>
void compare_on_gpu(const std::string& path, double rel_tol) {
  const at::ScalarType st = std::is_same_v<T, float> ? at::kFloat : at::kDouble;
  const ModelFile file = ModelFile::load(path);
  for (int t = 0; t < file.config().num_interactions; ++t) {
    const ScDescriptor d = build_sc_descriptor(file, t);
    std::string why;
    const auto generic = make_generic_cuda_sc<T>(d, &why);
    ASSERT_TRUE(generic) << why;
    const auto specialized = make_specialized_cuda_sc<T>(d, &why);
    ASSERT_TRUE(specialized) << why;
    // 1, 2 and a prime number of atoms, and enough for many thread blocks.
    for (const int64_t n : {1, 2, 37, 1009}) {
      const testing::ScInputs in = testing::random_sc_inputs(file, t, n, 700 + t);
      const at::Tensor A = testing::executor_layout(d, in.A.to(st)).contiguous();  // (mul_ir rows)
      const at::Tensor dB = at::randn({n, d.out_dim}, at::TensorOptions().dtype(st));
      at::Tensor B_cpu = at::empty({n, d.out_dim}, A.options()), dA_cpu = at::empty_like(A);
      const ScCpuExecutor<T> cpu(d);
      cpu.forward(A.data_ptr<T>(), in.species.data_ptr<int64_t>(), n, B_cpu.data_ptr<T>());
      cpu.backward(A.data_ptr<T>(), in.species.data_ptr<int64_t>(), dB.data_ptr<T>(), n, dA_cpu.data_ptr<T>());
      const Outputs<T> g = run_cuda(*generic, A, in.species, dB), s = run_cuda(*specialized, A, in.species, dB);
      EXPECT_TRUE(testing::all_close(g.B, B_cpu, rel_tol)) << "generic forward, layer " << t << ", " << n << " atoms";
      EXPECT_TRUE(testing::all_close(g.dA, dA_cpu, rel_tol)) << "generic backward, layer " << t << ", " << n << " atoms";
      EXPECT_TRUE(testing::all_close(s.B, g.B, rel_tol)) << specialized->name() << " forward, layer " << t;
      EXPECT_TRUE(testing::all_close(s.dA, g.dA, rel_tol)) << specialized->name() << " backward, layer " << t;
    }
  }
}

class ScGpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
    at::zeros({1}, at::TensorOptions().device(at::kCUDA));  // LibTorch makes its context current
    // A cache of this process's own: the first executor of each layer compiles, later ones hit.
    setenv("FLASHMACE_SC_CACHE", ("/tmp/flashmace_sc_gpu_" + std::to_string(getpid())).c_str(), 1);
  }
  void TearDown() override { unsetenv("FLASHMACE_SC_CACHE"); }
};

TEST_P(ScGpu, SpecializedEqualsGenericEqualsCpuFloat64) { compare_on_gpu<double>(GetParam(), testing::kRelTolF64); }
TEST_P(ScGpu, SpecializedEqualsGenericEqualsCpuFloat32) { compare_on_gpu<float>(GetParam(), testing::kRelTolF32); }

INSTANTIATE_TEST_SUITE_P(Models, ScGpu,
                         ::testing::Values(testing::exported_model("small_l1"), testing::exported_model("large_l2"),
                                           testing::sc_model("sc-corr1-l2"), testing::sc_model("sc-mixed-l1"),
                                           testing::sc_model("mp0-medium")),
                         [](const auto& info) {
                           std::string s = info.param.substr(info.param.rfind('/') + 1);
                           s = s.substr(0, s.find('.'));
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

TEST(ScGpuChoice, AutoFallsBackToGenericWithoutNvrtc) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  const ScDescriptor d = build_sc_descriptor(ModelFile::load(testing::sc_model("tiny-cuni")), 0);
  setenv("FLASHMACE_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so", 1);
  const auto e = make_cuda_sc_executor<double>(d, ScExecutorKind::Auto);
  const std::string msg = testing::error_of([&] { make_cuda_sc_executor<double>(d, ScExecutorKind::Specialized); });
  unsetenv("FLASHMACE_NVRTC_LIBRARY");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->name(), "generic");
  EXPECT_NE(msg.find("NVRTC not found"), std::string::npos) << msg;
}

TEST(ScGpuChoice, WithoutGpuTheErrorSaysWhy) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present";
  const ScDescriptor d = build_sc_descriptor(ModelFile::load(testing::sc_model("tiny-cuni")), 0);
  const std::string msg = testing::error_of([&] { make_cuda_sc_executor<float>(d, ScExecutorKind::Auto); });
  EXPECT_NE(msg.find("no CUDA symmetric-contraction executor: no CUDA GPU on this machine"), std::string::npos) << msg;
  EXPECT_NE(testing::error_of([&] { make_cuda_sc_executor<float>(d, ScExecutorKind::Specialized); }).find("sc specialized"),
            std::string::npos);
}

}  // namespace
}  // namespace flashmace
