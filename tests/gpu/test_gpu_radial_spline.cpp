// radial spline on CUDA (engine/ops/radial_spline.h): the CUDA table kernels equal the CPU's on the
// same table (float64 to round-off, float32 to its precision), and a CUDA engine step with the
// tables, CUDA graphs and reverse-edge pairs on, equals the CPU engine with the same tables. Skipped,
// and reported as skipped, where no GPU or no CUDA kernels exist. The CPU side:
// engine/test_radial_spline.cpp.
#include <gtest/gtest.h>

#include "core/lattice.h"
#include "core/model_file.h"
#include "engine/host_evaluation.h"
#include "engine/ops/edge_terms.h"
#include "engine/ops/radial_spline.h"
#include "test_support.h"

namespace flashmace {
namespace {

TEST(RadialSplineGpu, KernelsEqualTheCpus) {
  if (!testing::gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  const MaceParams m =
      MaceParams::load(ModelFile::load(testing::exported_model("small_l1")), at::kDouble, at::kCPU);
  const auto folded = fold_radial_mlp(m.layers[1].radial_layers);
  at::manual_seed(3);
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    const auto cpu = at::TensorOptions().dtype(dtype);
    const RadialSplineOp on_cpu(m, folded, false, 256, 0, cpu), on_gpu(m, folded, false, 256, 0, cpu.device(at::kCUDA));
    const at::Tensor v = at::randn({3000, 3}, cpu) * 2.5;  // lengths up to ~10 A: beyond r_max too
    const at::Tensor first = at::randint(3000, {1700}, at::TensorOptions().dtype(at::kLong));
    const at::Tensor g = at::randn({1700, on_cpu.width()}, cpu);
    const double tol = dtype == at::kDouble ? 1e-12 : 1e-5;
    const at::Tensor R = on_cpu.forward(v, first);
    EXPECT_LE((on_gpu.forward(v.cuda(), first.cuda()).cpu() - R).abs().max().item<double>(),
              tol * R.abs().max().item<double>());
    const at::Tensor dr = on_cpu.backward(v, first, g);
    EXPECT_LE((on_gpu.backward(v.cuda(), first.cuda(), g.cuda()).cpu() - dr).abs().max().item<double>(),
              tol * dr.abs().max().item<double>());
    at::Tensor gv = at::zeros({3000, 3}, cpu), gv_gpu = gv.cuda();
    const at::Tensor dr_e = at::randn({3000}, cpu);
    on_cpu.add_edge_gradient(v, nullptr, dr_e, gv);
    on_gpu.add_edge_gradient(v.cuda(), nullptr, dr_e.cuda(), gv_gpu);
    EXPECT_LE((gv_gpu.cpu() - gv).abs().max().item<double>(), tol * gv.abs().max().item<double>());
  }
}

TEST(RadialSplineGpu, EngineStepEqualsTheCpuEngine) {
  if (!testing::gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  const ModelFile file = ModelFile::load(testing::exported_model("small_l1"));
  const Structure s = make_cubic_lattice("fcc", 3.61, 4, {28, 29}, 0.05, 5);
  auto run = [&](const std::string& device) {
    EngineOptions o;
    o.dtype = Dtype::Float64;
    o.device = device;
    set_engine_option(o, "radial", "spline");
    const auto ev = make_evaluator(file, o);
    evaluate_structure(*ev, s);  // a captured step on CUDA, replayed below
    return evaluate_structure(*ev, s);
  };
  const Prediction cpu = run("cpu"), gpu = run("cuda");
  testing::expect_same_prediction(gpu, cpu, 1e-12, 1e-10, "radial spline, CUDA against CPU");
}

}  // namespace
}  // namespace flashmace
