// The fast engine on NonLinear blocks (MACE-MH-1's architecture: edge irreps narrower than the hidden
// irreps, element-aware radial MLPs with LayerNorm, the gate, one symmetric-contraction weight set,
// the envelope inside the interactions) equals the reference path in float64: for every output,
// with the planner's chunks and with forced chunks of 1, 7 and 64 edges, streamed message and
// density sums, radial pairs asked for (they must not apply), and on a ghost-atom domain. The
// reference path itself is tested against mace-torch on these options
// (tests/reference/test_live_mace.py nonlinear_*, tests/tools/test_architecture_presets.py mh1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/lattice.h"
#include "core/local_graph.h"
#include "core/model_file.h"
#include "engine/host_evaluation.h"
#include "engine/ops/gate_backward.h"
#include "engine/ops/nonlinear_radial.h"
#include "model/e3nn_ops.h"
#include "model/mace_params.h"
#include "test_support.h"

namespace flashmace {
namespace {

constexpr double kEnergyRelTol = 1e-12;
constexpr double kAbsTol = 1e-10;

std::string tiny_mh1() { return std::string(FLASHMACE_SOURCE_DIR) + "/potentials/testing/tiny-mh1-random.safetensors"; }

std::unique_ptr<Evaluator> evaluator(const std::string& path, int64_t chunk = 0, bool streamed = false,
                                     const std::string& pairs = "auto") {
  EngineOptions o;
  set_engine_option(o, "path", path);
  o.dtype = Dtype::Float64;
  o.edge_chunk = chunk;
  o.atom_chunk = chunk > 0 ? 5 : 0;
  o.memory_bytes = streamed ? 1 : 0;
  set_engine_option(o, "radial_pairs", pairs);
  return make_evaluator(ModelFile::load(tiny_mh1()), o);
}

std::vector<double> flat(const std::array<double, 9>& a) { return {a.begin(), a.end()}; }

TEST(NonLinearEngine, TheTestModelHasMh1sOptions) {
  const ModelFile file = ModelFile::load(tiny_mh1());
  const MaceConfig& c = file.config();
  for (int t = 0; t < c.num_interactions; ++t) EXPECT_TRUE(c.nonlinear(t)) << t;
  EXPECT_FALSE(c.edge_irreps.empty());
  EXPECT_TRUE(c.use_edge_irreps_first);
  EXPECT_TRUE(c.use_agnostic_product);
  EXPECT_FALSE(c.apply_cutoff);
  EXPECT_EQ(c.distance_transform, "Agnesi");
  EXPECT_TRUE(c.pair_repulsion);
}

// A compressed, rattled Cu-Ni lattice: pairs inside the ZBL range and near the cutoff (where the
// envelope inside the interactions matters).
TEST(NonLinearEngine, ChunkedFastPathEqualsReference) {
  const Structure s = make_cubic_lattice("fcc", 3.2, 3, {28, 29}, 0.15, 3);
  const Prediction want = evaluate_structure(*evaluator("reference"), s);
  double largest = 0;
  for (double f : want.forces) largest = std::max(largest, std::abs(f));
  ASSERT_GT(largest, 1e-3);  // (the comparison is not of zeros)
  double vscale = 0;
  for (double v : want.virial) vscale = std::max(vscale, std::abs(v));
  // The ZBL repulsion of a random model makes virials of 1e4-1e5 eV: summed in another order, their
  // float64 round-off reaches 1e-14 of that.
  const double virial_tol = kAbsTol + 1e-14 * vscale;
  struct Plan {
    int64_t chunk;
    bool streamed;
    std::string pairs;
  };
  for (const Plan& p : {Plan{0, false, "auto"}, Plan{0, false, "on"}, Plan{64, false, "on"}, Plan{7, false, "off"},
                        Plan{7, true, "on"}, Plan{1, true, "off"}}) {
    const Prediction got = evaluate_structure(*evaluator("fast", p.chunk, p.streamed, p.pairs), s);
    const std::string what = "edge chunk " + std::to_string(p.chunk) + (p.streamed ? " streamed" : "") + " pairs " + p.pairs;
    EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << what;
    EXPECT_LE(testing::max_abs_diff(got.node_energy, want.node_energy), kAbsTol) << what;
    EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol) << what;
    EXPECT_LE(testing::max_abs_diff(flat(got.virial), flat(want.virial)), virial_tol) << what;
  }
}

TEST(NonLinearEngine, GhostDomainEqualsReferenceIncludingPerAtomVirials) {
  const Structure s = make_cubic_lattice("fcc", 3.4, 2, {28, 29}, 0.1, 9);
  const auto reference = evaluator("reference");
  std::vector<int> owner;
  const LocalGraph lg = periodic_local_graph(s, reference->cutoff(), &owner);
  ASSERT_GT(lg.nghost, 0);
  OwnerMapExchanger exchanger(lg.nlocal, owner);
  const LocalPrediction want = evaluate_local(*reference, lg, &exchanger, true);
  for (const int64_t chunk : {int64_t{0}, int64_t{13}}) {
    const LocalPrediction got = evaluate_local(*evaluator("fast", chunk, chunk > 0), lg, &exchanger, true);
    const std::string what = "chunk " + std::to_string(chunk);
    EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << what;
    EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol) << what;
    EXPECT_LE(testing::max_abs_diff(got.atom_virial, want.atom_virial), kAbsTol) << what;
  }
}

// The explicit backward passes against finite differences of their forwards (float64, central).
TEST(NonLinearEngine, GateBackwardIsTheGatesDerivative) {
  const Irreps out = Irreps::parse("3x0e+2x1o+2x2e");
  const Irreps in = Irreps::parse("3x0e+4x0e+2x1o+2x2e");  // scalars, one gate per gated channel, gated
  const at::Generator gen = at::detail::createCPUGenerator(5);
  const at::Tensor x = at::randn({4, in.dim()}, gen, at::kDouble), g = at::randn({4, out.dim()}, gen, at::kDouble);
  const at::Tensor got = gate_backward(x, g, out);
  const double h = 1e-6;
  at::Tensor want = at::zeros_like(x);
  for (int64_t j = 0; j < in.dim(); ++j) {
    at::Tensor xp = x.clone(), xm = x.clone();
    xp.select(1, j).add_(h);
    xm.select(1, j).sub_(h);
    want.select(1, j).copy_(((gate(xp, out) - gate(xm, out)) * g).sum(1) / (2 * h));
  }
  EXPECT_LE(at::max(at::abs(got - want)).item<double>(), 1e-8);
  EXPECT_GT(at::max(at::abs(want)).item<double>(), 0.1);
}

TEST(NonLinearEngine, RadialMlpBackwardIsItsDerivative) {
  const ModelFile file = ModelFile::load(tiny_mh1());
  const MaceParams m = MaceParams::load(file, at::kDouble, at::kCPU);
  const NonlinearRadial radial(m, m.layers[1]);
  const int64_t E = 9, nb = m.bessel_weights.size(0);
  const at::Generator gen = at::detail::createCPUGenerator(7);
  const at::Tensor ef = at::randn({E, nb}, gen, at::kDouble);
  const at::Tensor u = at::randn({E, 3}, gen, at::kDouble);
  // lengths across the cutoff (4.5 A): the envelope and its slope, zero beyond
  const at::Tensor v = u / at::linalg_vector_norm(u, 2, {1}, true) * at::linspace(1.0, 4.8, E, at::kDouble).unsqueeze(1);
  const at::Tensor zs = at::randint(0, 2, {E}, gen, at::kLong), zr = at::randint(0, 2, {E}, gen, at::kLong);
  NonlinearRadialState state;
  const auto [R, d] = radial.forward(ef, zs, zr, v, &state);
  const at::Tensor gR = at::randn_like(R), gd = at::randn_like(d);
  const auto [gef, gv] = radial.backward(state, v, gR, gd);
  auto loss = [&](const at::Tensor& e, const at::Tensor& vv) {
    NonlinearRadialState st;
    const auto [r2, d2] = radial.forward(e, zs, zr, vv, &st);
    return (r2 * gR).sum().item<double>() + (d2 * gd).sum().item<double>();
  };
  const double h = 1e-6;
  double err_ef = 0, err_v = 0, scale = 0;
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t k = 0; k < nb; ++k) {
      at::Tensor p = ef.clone(), q = ef.clone();
      p[e][k] += h;
      q[e][k] -= h;
      const double fd = (loss(p, v) - loss(q, v)) / (2 * h);
      err_ef = std::max(err_ef, std::abs(fd - gef[e][k].item<double>()));
      scale = std::max(scale, std::abs(fd));
    }
    for (int64_t k = 0; k < 3; ++k) {
      at::Tensor p = v.clone(), q = v.clone();
      p[e][k] += h;
      q[e][k] -= h;
      const double fd = (loss(ef, p) - loss(ef, q)) / (2 * h);
      err_v = std::max(err_v, std::abs(fd - gv[e][k].item<double>()));
    }
  }
  EXPECT_GT(scale, 0.1);
  EXPECT_LE(err_ef, 1e-7 * scale);
  EXPECT_LE(err_v, 1e-7 * scale);
  EXPECT_GT(at::max(at::abs(gv)).item<double>(), 1e-3);
}

TEST(NonLinearEngine, RadialSplineIsRefusedWithTheReason) {
  EngineOptions o;
  o.dtype = Dtype::Float64;
  set_engine_option(o, "radial", "spline");
  try {
    make_evaluator(ModelFile::load(tiny_mh1()), o);
    FAIL() << "radial spline accepted on NonLinear blocks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("read the edge's elements"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("radial mlp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashmace
