// The generic CUDA executor's per-thread code (sc_generic_tables.h, the same source the GPU kernel
// runs) equals the generic CPU executor when run thread by thread on the host.
#include <gtest/gtest.h>

#include "core/model_file.h"
#include "sc/sc_cpu_executor.h"
#include "sc/sc_descriptor.h"
#include "sc/sc_generic_tables.h"
#include "sc_test_support.h"
#include "test_support.h"

namespace flashmace {
namespace {

using testing::ScModel;

template <typename T>
void check_model(const std::string& path, double rel_tol) {
  const at::ScalarType st = std::is_same_v<T, float> ? at::kFloat : at::kDouble;
  const ModelFile file = ModelFile::load(path);
  for (int t = 0; t < file.config().num_interactions; ++t) {
    const ScDescriptor d = build_sc_descriptor(file, t);
    ASSERT_EQ(sc_detail::generic_unsupported(d), "");
    const sc_detail::GenericHostTables<T> host = sc_detail::build_generic_tables<T>(d);
    const sc_detail::GenericTables<T> tables = host.view();
    testing::ScInputs in = testing::random_sc_inputs(file, t, 13, 800 + t);
    in.species[5] = d.num_elements;  // outside [0, Z): NaN row
    const at::Tensor A = testing::executor_layout(d, in.A.to(st)).contiguous();  // (mul_ir rows)
    const int64_t n = A.size(0);
    const at::Tensor dB = at::randn({n, d.out_dim}, at::TensorOptions().dtype(st));
    at::Tensor B = at::zeros({n, d.out_dim}, A.options()), dA = at::zeros_like(A);
    const auto* species = reinterpret_cast<const long long*>(in.species.data_ptr<int64_t>());
    std::vector<T> scratch(2 * d.num_components + tables.max_dim);
    for (long long tid = 0; tid < n * d.channels; ++tid) {
      sc_detail::generic_forward_thread(tables, A.data_ptr<T>(), species, B.data_ptr<T>(), tid, scratch.data(), 1);
      sc_detail::generic_backward_thread(tables, A.data_ptr<T>(), species, dB.data_ptr<T>(), dA.data_ptr<T>(), tid,
                                         scratch.data(), 1);
    }
    EXPECT_TRUE(at::isnan(B[5]).all().item<bool>());
    EXPECT_TRUE(at::isnan(dA[5]).all().item<bool>());

    const at::Tensor keep = at::arange(n) != 5;
    const at::Tensor A_ok = A.index({keep}).contiguous(), sp_ok = in.species.index({keep}).contiguous(),
                     dB_ok = dB.index({keep}).contiguous();
    at::Tensor B_cpu = at::empty({n - 1, d.out_dim}, A.options()), dA_cpu = at::empty_like(A_ok);
    const ScCpuExecutor<T> cpu(d);
    cpu.forward(A_ok.data_ptr<T>(), sp_ok.data_ptr<int64_t>(), n - 1, B_cpu.data_ptr<T>());
    cpu.backward(A_ok.data_ptr<T>(), sp_ok.data_ptr<int64_t>(), dB_ok.data_ptr<T>(), n - 1, dA_cpu.data_ptr<T>());
    EXPECT_TRUE(testing::all_close(B.index({keep}), B_cpu, rel_tol)) << "forward, layer " << t;
    EXPECT_TRUE(testing::all_close(dA.index({keep}), dA_cpu, rel_tol)) << "backward, layer " << t;
  }
}

class ScGenericCore : public ::testing::TestWithParam<ScModel> {};

TEST_P(ScGenericCore, ThreadCodeEqualsTheCpuExecutorFloat64) { check_model<double>(GetParam().path, testing::kRelTolF64); }
TEST_P(ScGenericCore, ThreadCodeEqualsTheCpuExecutorFloat32) { check_model<float>(GetParam().path, testing::kRelTolF32); }

INSTANTIATE_TEST_SUITE_P(Models, ScGenericCore, ::testing::ValuesIn(testing::sc_test_models()), [](const auto& info) {
  std::string s = info.param.name;
  for (char& ch : s)
    if (ch == '-') ch = '_';
  return s;
});

}  // namespace
}  // namespace flashmace
