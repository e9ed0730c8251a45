// Physical consistency of the reference path, independent of MACE's own numbers: forces and
// stress are derivatives of the energy, symmetries hold, float32 tracks float64, bad input fails
// with a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "core/error.h"
#include "core/model_file.h"
#include "model/reference_model.h"
#include "test_support.h"

namespace flashmace {
namespace {

// Five-point central differences with h = 1e-3 A on the interaction energy (E0 is constant and, at
// up to 2000 eV per atom, would dominate the rounding): truncation ~h^4 f^(5)/30 ~ 1e-13, rounding
// ~1.5 eps |E_int| / h ~ 1e-11 for |E_int| ~ 100 eV; 1e-8 leaves margin and still catches any
// wrong term.
constexpr double kFDStep = 1e-3;
constexpr double kFDTol = 1e-8;
// Rotations and translations change float64 rounding only (~1e-14 relative).
constexpr double kSymmetryTol = 1e-10;

Structure bulk(const std::string& model) {
  return testing::reference_structure(SafetensorsFile::load(testing::reference_file(model)), "bulk");
}

template <typename F>
double five_point(F&& energy_at) {
  return (-energy_at(2 * kFDStep) + 8 * energy_at(kFDStep) - 8 * energy_at(-kFDStep) + energy_at(-2 * kFDStep)) /
         (12 * kFDStep);
}

class PhysicsCase : public ::testing::TestWithParam<std::string> {};

TEST_P(PhysicsCase, ForcesMatchFiniteDifferences) {
  const ReferenceModel model(ModelFile::load(testing::exported_model(GetParam())));
  for (const char* which : {"bulk", "cluster"}) {
    const Structure s0 =
        testing::reference_structure(SafetensorsFile::load(testing::reference_file(GetParam())), which);
    const Prediction p = model.evaluate(s0);
    for (int atom : {0, 3, s0.size() - 1}) {
      for (int d = 0; d < 3; ++d) {
        const double fd = -five_point([&](double h) {
          Structure s = s0;
          s.positions[3 * atom + d] += h;
          return model.evaluate(s).interaction_energy;
        });
        EXPECT_NEAR(p.forces[3 * atom + d], fd, kFDTol) << which << " atom " << atom << " dir " << d;
      }
    }
  }
}

TEST_P(PhysicsCase, StressMatchesStrainDerivative) {
  const ReferenceModel model(ModelFile::load(testing::exported_model(GetParam())));
  const Structure s0 = bulk(GetParam());
  const Prediction p = model.evaluate(s0);
  for (int a = 0; a < 3; ++a) {
    for (int b = a; b < 3; ++b) {
      // x -> x (I + eps), eps symmetric with eps_ab = eps_ba = t / 2 (or eps_aa = t)
      const double dE = five_point([&](double t) {
        Structure s = s0;
        auto strain = [&](double* row) {
          const double ra = row[a], rb = row[b];
          row[b] += 0.5 * t * ra;
          row[a] += 0.5 * t * rb;
        };
        for (int i = 0; i < s.size(); ++i) strain(&s.positions[3 * i]);
        for (int k = 0; k < 3; ++k) strain(&s.cell[3 * k]);
        return model.evaluate(s).interaction_energy;
      });
      EXPECT_NEAR(p.stress[3 * a + b], dE / s0.volume(), kFDTol) << a << b;
      EXPECT_NEAR(p.stress[3 * a + b], p.stress[3 * b + a], 1e-14);
    }
  }
}

TEST_P(PhysicsCase, EnergyInvariantAndForcesRotateWithStructure) {
  const ReferenceModel model(ModelFile::load(testing::exported_model(GetParam())));
  const Structure s0 = bulk(GetParam());
  const Prediction p0 = model.evaluate(s0);

  // A random proper rotation from a random unit quaternion.
  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  double q[4], n = 0;
  for (double& x : q) {
    x = normal(rng);
    n += x * x;
  }
  for (double& x : q) x /= std::sqrt(n);
  const double w = q[0], x = q[1], y = q[2], z = q[3];
  const double R[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - w * z),     2 * (x * z + w * y),
                       2 * (x * y + w * z),     1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                       2 * (x * z - w * y),     2 * (y * z + w * x),     1 - 2 * (x * x + y * y)};
  auto rotate = [&](const double* v, double* out) {
    for (int i = 0; i < 3; ++i) out[i] = R[3 * i] * v[0] + R[3 * i + 1] * v[1] + R[3 * i + 2] * v[2];
  };
  Structure s = s0;
  const double translation[3] = {1.7, -0.4, 12.3};
  for (int i = 0; i < s.size(); ++i) {
    rotate(&s0.positions[3 * i], &s.positions[3 * i]);
    for (int d = 0; d < 3; ++d) s.positions[3 * i + d] += translation[d];
  }
  for (int k = 0; k < 3; ++k) rotate(&s0.cell[3 * k], &s.cell[3 * k]);
  const Prediction p = model.evaluate(s);

  EXPECT_NEAR(p.energy, p0.energy, kSymmetryTol * std::abs(p0.energy));
  for (int i = 0; i < s.size(); ++i) {
    double f[3];
    rotate(&p0.forces[3 * i], f);
    for (int d = 0; d < 3; ++d) EXPECT_NEAR(p.forces[3 * i + d], f[d], kSymmetryTol) << "atom " << i;
  }
}

// float32 tracks float64 where the model acts: on the interaction energy (the total is dominated by
// E0, up to 2000 eV per atom, so a bound on it hides a wrong interaction) and on the forces,
// norm-wise. float32 carries ~6e-8 relative per operation; a few thousand operations per atom stay
// near 1e-6, so the bound (kFloat32Tol) is ~100x the error seen and catches a 1 % error 100 times over.
constexpr double kFloat32Tol = 1e-4;

double norm_relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / norm);
}

TEST_P(PhysicsCase, Float32TracksFloat64OnInteractionEnergyAndForces) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  const ReferenceModel f64(ModelFile::load(testing::exported_model(GetParam())));
  for (const std::string& file : {testing::exported_model(GetParam()), testing::exported_model(GetParam() + "_f32")}) {
    const ReferenceModel f32(ModelFile::load(file), EvalOptions{"float32", "cpu"});
    for (const char* which : {"bulk", "cluster"}) {
      const Structure s = testing::reference_structure(ref, which);
      const Graph g = testing::reference_graph(ref, which);
      const Prediction want = f64.evaluate(s, g), got = f32.evaluate(s, g);
      const double e_error = std::abs(got.interaction_energy - want.interaction_energy) / std::abs(want.interaction_energy);
      const double f_error = norm_relative_error(got.forces, want.forces);
      std::printf("%s %s: float32 interaction energy %.3g, forces %.3g (relative)\n", file.c_str(), which, e_error,
                  f_error);
      EXPECT_LE(e_error, kFloat32Tol) << file << " " << which;
      EXPECT_LE(f_error, kFloat32Tol) << file << " " << which;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SharedReference, PhysicsCase, ::testing::Values("small_l1", "scalar_l0", "large_l2"),
                         [](const auto& info) { return info.param; });

TEST(ReferenceInput, BadStructuresFailWithClearMessages) {
  const ReferenceModel model(ModelFile::load(testing::exported_model("small_l1")));  // Ni, Cu
  Structure s = bulk("small_l1");

  Structure unknown = s;
  unknown.atomic_numbers[5] = 8;
  EXPECT_NE(testing::error_of([&] {
              model.evaluate(unknown);
            }).find("Atom 5 is O (Z=8), which the model does not know (it has: Ni Cu)"),
            std::string::npos);

  Structure overlap = s;
  for (int d = 0; d < 3; ++d) overlap.positions[3 * 7 + d] = overlap.positions[3 * 2 + d];
  const std::string msg = testing::error_of([&] { model.evaluate(overlap); });
  EXPECT_NE(msg.find("Atoms 2 and 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("overlapping"), std::string::npos) << msg;

  Structure nan = s;
  nan.positions[3 * 4 + 1] = std::nan("");
  EXPECT_NE(testing::error_of([&] { model.evaluate(nan); }).find("Atom 4 has a non-finite coordinate"),
            std::string::npos);

  EXPECT_NE(testing::error_of([&] { model.evaluate(Structure{}); }).find("Empty structure"), std::string::npos);

  EXPECT_NE(testing::error_of([&] {
              ReferenceModel(ModelFile::load(testing::exported_model("small_l1")), EvalOptions{"float16", "cpu"});
            }).find("Unknown dtype 'float16'"),
            std::string::npos);
}

TEST(ReferenceInput, IsolatedAtomHasNoForceAndEnergyFromItsOwnFeatures) {
  // No edges: messages vanish, the energy is E0 plus what the skip/self path gives; forces are 0.
  const ReferenceModel model(ModelFile::load(testing::exported_model("small_l1")));
  Structure s;
  s.atomic_numbers = {28};
  s.positions = {0.0, 0.0, 0.0};
  const Prediction p = model.evaluate(s);
  ASSERT_EQ(p.forces.size(), 3u);
  for (double f : p.forces) EXPECT_EQ(f, 0.0);
  EXPECT_TRUE(std::isfinite(p.energy));
}

}  // namespace
}  // namespace flashmace
