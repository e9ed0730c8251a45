// radial spline (engine/ops/radial_spline.h): the tables against the exact radial MLP (fourth-order
// convergence, the measured error bounding random lengths, zero beyond r_max, the backward pass
// against the exact slopes), the engine with them against the reference path within the tables'
// error, forces as the exact gradient of the spline energy (central differences), and the
// option's refusals. Float64 on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/model_file.h"
#include "engine/host_evaluation.h"
#include "engine/ops/edge_terms.h"
#include "engine/ops/radial_spline.h"
#include "test_support.h"

namespace flashmace {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);

MaceParams model64(const std::string& name) {
  return MaceParams::load(ModelFile::load(testing::exported_model(name)), at::kDouble, at::kCPU);
}

// n edge vectors of random directions whose lengths are r.
at::Tensor vectors_of(const at::Tensor& r) {
  const at::Tensor d = at::randn({r.size(0), 3}, kF64);
  return d / at::linalg_vector_norm(d, 2, {1}, true) * r.unsqueeze(1);
}

struct LayerCase {
  std::string model;
  int layer;
  bool hidden_only;
};

class RadialSplineTable : public ::testing::TestWithParam<LayerCase> {};

TEST_P(RadialSplineTable, InterpolatesTheExactMlpToItsMeasuredError) {
  const LayerCase c = GetParam();
  const MaceParams m = model64(c.model);
  const auto folded = fold_radial_mlp(m.layers[c.layer].radial_layers);
  at::manual_seed(7);
  // Cubic Hermite pieces: value errors fall as h^4, slope errors as h^3.
  std::vector<RadialSplineAccuracy> acc;
  for (const int64_t n : {32, 64, 128}) acc.push_back(RadialSplineOp(m, folded, c.hidden_only, n, 0, kF64).accuracy());
  for (std::size_t k = 0; k + 1 < acc.size(); ++k) {
    const double value_ratio = acc[k].value_error / acc[k + 1].value_error;
    const double slope_ratio = acc[k].slope_error / acc[k + 1].slope_error;
    EXPECT_GT(value_ratio, 10.0) << acc[k].intervals;
    EXPECT_LT(value_ratio, 24.0) << acc[k].intervals;
    EXPECT_GT(slope_ratio, 5.0) << acc[k].intervals;
    EXPECT_LT(slope_ratio, 12.0) << acc[k].intervals;
  }

  const RadialSplineOp op(m, folded, c.hidden_only, 64, 0, kF64);
  const RadialSplineAccuracy& a = op.accuracy();
  const double r_max = m.config.r_max;
  const at::Tensor r = at::rand({500}, kF64) * (r_max - 0.3) + 0.3;
  const at::Tensor v = vectors_of(r);
  const auto [f, df] = exact_radial_functions(m, folded, c.hidden_only, r);
  const at::Tensor R = op.forward(v, {});
  ASSERT_EQ(R.sizes(), f.sizes());
  const double value_error = (R - f).abs().max().item<double>();
  EXPECT_LE(value_error, 2 * a.value_error);
  EXPECT_GT(value_error, 0.0);  // a table, not the MLP
  EXPECT_LT(a.value_error, 1e-3 * a.value_scale);

  // The backward pass: sum_k g_k dR_k/dr against the exact slopes, within the slope error.
  const at::Tensor g = at::randn(f.sizes(), kF64);
  const at::Tensor dr = op.backward(v, {}, g);
  const at::Tensor want = (g * df).sum(1);
  const at::Tensor bound = 2 * a.slope_error * g.abs().sum(1);
  EXPECT_TRUE(((dr - want).abs() <= bound).all().item<bool>()) << (dr - want).abs().max().item<double>();

  // Rows reading chosen edges equal those edges' rows.
  const at::Tensor first = at::tensor({3, 3, 7, 0}, at::TensorOptions().dtype(at::kLong));
  EXPECT_TRUE(op.forward(v, first).equal(R.index_select(0, first)));
  EXPECT_TRUE(op.backward(v, first, g.index_select(0, first)).equal(dr.index_select(0, first)));

  // Beyond r_max, as the exact functions: zero, with zero slope.
  const at::Tensor far = vectors_of(at::tensor({r_max * 1.0001, r_max * 1.01, 1e3}, kF64));
  EXPECT_EQ(op.forward(far, {}).abs().max().item<double>(), 0.0);
  EXPECT_EQ(op.backward(far, {}, at::ones({3, op.width()}, kF64)).abs().max().item<double>(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Models, RadialSplineTable,
                         ::testing::Values(LayerCase{"small_l1", 1, false}, LayerCase{"small_l1", 0, true},
                                           LayerCase{"large_l2", 1, false}, LayerCase{"scalar_l0", 0, false}),
                         [](const auto& info) {
                           return info.param.model + "_layer" + std::to_string(info.param.layer) +
                                  (info.param.hidden_only ? "_hidden" : "");
                         });

std::unique_ptr<Evaluator> spline_evaluator(const std::string& model, const std::string& radial_pairs,
                                            int64_t intervals = 0, std::vector<std::string>* log = nullptr) {
  EngineOptions o;
  o.dtype = Dtype::Float64;
  set_engine_option(o, "radial", "spline");
  set_engine_option(o, "radial_pairs", radial_pairs);
  o.radial_intervals = intervals;
  if (log) o.log = [log](const std::string& line) { log->push_back(line); };
  return make_evaluator(ModelFile::load(testing::exported_model(model)), o);
}

std::unique_ptr<Evaluator> reference_evaluator(const std::string& model) {
  EngineOptions o;
  o.dtype = Dtype::Float64;
  o.path = EvaluationPath::Reference;
  return make_evaluator(ModelFile::load(testing::exported_model(model)), o);
}

// With the automatic float64 tables (errors within 1e-10 of the largest value and slope), the
// whole evaluation stays within ~1e-9 of the exact one, with and without reverse-edge pairs.
TEST(RadialSpline, EngineEqualsReferenceWithinTheTablesError) {
  for (const std::string model : {"small_l1", "large_l2"})
    for (const std::string structure : {"bulk", "cluster"}) {
      const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(model));
      const Structure s = testing::reference_structure(ref, structure);
      const Graph g = testing::reference_graph(ref, structure);
      const Prediction want = evaluate_structure(*reference_evaluator(model), s, g);
      for (const std::string pairs : {"on", "off"}) {
        std::vector<std::string> log;
        const Prediction got = evaluate_structure(*spline_evaluator(model, pairs, 0, &log), s, g);
        const std::string what = model + " " + structure + " pairs " + pairs;
        testing::expect_same_prediction(got, want, 1e-9, 1e-8, what);
        EXPECT_GT(testing::max_abs_diff(got.forces, want.forces), 0.0) << what;
        const auto said = std::count_if(log.begin(), log.end(), [](const std::string& line) {
          return line.rfind("radial spline: layer ", 0) == 0;
        });
        EXPECT_EQ(said, 3) << what;  // layers 0 and 1, and layer 0 per edge (reassociate auto)
      }
    }
}

// A coarse table is a different potential, but its forces are still the exact gradient of its
// energy (the slopes are the interpolant's own): central differences agree to their own error.
TEST(RadialSpline, ForcesAreTheGradientOfTheSplineEnergy) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file("small_l1"));
  Structure s = testing::reference_structure(ref, "cluster");
  const auto coarse = spline_evaluator("small_l1", "on", 16);
  const Prediction p = evaluate_structure(*coarse, s);
  const Prediction exact = evaluate_structure(*reference_evaluator("small_l1"), s);
  EXPECT_GT(testing::max_abs_diff(p.forces, exact.forces), 1e-6);  // the coarse table is visibly different
  const double delta = 1e-5;
  double worst = 0;
  for (int atom = 0; atom < std::min(s.size(), 4); ++atom)
    for (int c = 0; c < 3; ++c) {
      double& x = s.positions[3 * atom + c];
      const double x0 = x;
      x = x0 + delta;
      const double up = evaluate_structure(*coarse, s).energy;
      x = x0 - delta;
      const double down = evaluate_structure(*coarse, s).energy;
      x = x0;
      worst = std::max(worst, std::abs(-(up - down) / (2 * delta) - p.forces[3 * atom + c]));
    }
  EXPECT_LT(worst, 1e-7);
}

TEST(RadialSpline, RefusedWhereNoTableOverTheLengthExists) {
  EngineOptions o;
  EXPECT_THROW(set_engine_option(o, "radial", "splines"), OptionError);
  EXPECT_THROW(set_engine_option(o, "radial_intervals", "8"), OptionError);
  EXPECT_THROW(set_engine_option(o, "radial_intervals", "8192"), OptionError);
  EXPECT_TRUE(set_engine_option(o, "radial_intervals", "0"));
  set_engine_option(o, "radial", "spline");
  o.path = EvaluationPath::Reference;
  EXPECT_NE(testing::error_of([&] { make_evaluator(ModelFile::load(testing::exported_model("small_l1")), o); })
                .find("radial spline is a fast-path mode"),
            std::string::npos);
  o.path = EvaluationPath::Fast;
  const std::string agnesi = std::string(FLASHMACE_SOURCE_DIR) + "/potentials/testing/tiny-cuni-agnesi-random.safetensors";
  EXPECT_NE(testing::error_of([&] { make_evaluator(ModelFile::load(agnesi), o); })
                .find("depend on the elements of each pair (distance_transform Agnesi)"),
            std::string::npos);
}

}  // namespace
}  // namespace flashmace
