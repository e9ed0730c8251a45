// The reference path on a CUDA GPU equals the CPU reference path (and so official MACE) on the
// shared reference cases. Skipped, and reported as skipped, where no GPU exists.
#include <gtest/gtest.h>

#include <cmath>

#include "core/local_graph.h"
#include "core/model_file.h"
#include "model/device.h"
#include "model/reference_model.h"
#include "test_support.h"

namespace flashmace {
namespace {

// Different reduction orders (atomics, cuBLAS) change float64 round-off only.
constexpr double kAbsTol = 1e-10;
constexpr double kEnergyRelTol = 1e-12;

class GpuCase : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
  }
};

TEST_P(GpuCase, CudaMatchesCpuAndOfficialMace) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  const ModelFile file = ModelFile::load(testing::exported_model(GetParam()));
  const ReferenceModel cpu(file, EvalOptions{"float64", "cpu"});
  const ReferenceModel gpu(file, EvalOptions{"float64", "cuda"});
  for (const std::string which : {"bulk", "cluster"}) {
    const Structure s = testing::reference_structure(ref, which);
    const Graph g = testing::reference_graph(ref, which);
    const Prediction pc = cpu.evaluate(s, g), pg = gpu.evaluate(s, g);
    EXPECT_LE(std::abs(pg.energy - pc.energy) / std::abs(pc.energy), kEnergyRelTol) << which;
    EXPECT_LE(testing::max_abs_diff(pg.forces, pc.forces), kAbsTol) << which;
    EXPECT_LE(testing::max_abs_diff(pg.node_energy, pc.node_energy), kAbsTol) << which;
    const std::vector<double> sg(pg.stress.begin(), pg.stress.end()), sc(pc.stress.begin(), pc.stress.end());
    EXPECT_LE(testing::max_abs_diff(sg, sc), kAbsTol) << which;
    EXPECT_LE(testing::max_abs_diff(pg.forces, ref.to_doubles(which + ".output.forces")), kAbsTol) << which;
  }
}

TEST_P(GpuCase, CudaFloat32TracksFloat64Reference) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  const ReferenceModel gpu(ModelFile::load(testing::exported_model(GetParam())), EvalOptions{"float32", "cuda"});
  const Structure s = testing::reference_structure(ref, "bulk");
  const double e = gpu.evaluate(s, testing::reference_graph(ref, "bulk")).energy;
  const double e_ref = ref.to_doubles("bulk.output.energy")[0];
  EXPECT_LE(std::abs(e - e_ref) / std::abs(e_ref), 1e-5);  // float32 precision over ~1e3 terms
}

TEST_P(GpuCase, CudaHaloExchangeEqualsPeriodicEvaluation) {
  const ModelFile file = ModelFile::load(testing::exported_model(GetParam()));
  const ReferenceModel cpu(file, EvalOptions{"float64", "cpu"});
  const ReferenceModel gpu(file, EvalOptions{"float64", "cuda"});
  const Structure s = testing::reference_structure(SafetensorsFile::load(testing::reference_file(GetParam())), "bulk");
  std::vector<int> owner;
  const LocalGraph lg = periodic_local_graph(s, gpu.cutoff(), &owner);
  OwnerMapExchanger exchanger(lg.nlocal, owner);
  const LocalPrediction local = gpu.evaluate_local(lg, &exchanger);
  EXPECT_LE(std::abs(local.energy - cpu.evaluate(s).energy), kEnergyRelTol * std::abs(local.energy));
}

INSTANTIATE_TEST_SUITE_P(SharedReference, GpuCase, ::testing::Values("small_l1", "scalar_l0", "large_l2"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace flashmace
