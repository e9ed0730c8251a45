#pragma once
// Models, inputs and comparisons shared by the SC tests.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/model_file.h"
#include "model/symmetric_contraction.h"
#include "sc/sc_descriptor.h"

namespace flashmace::testing {

// Tolerances, relative to the largest magnitude of the expected tensor. float64: the executors and
// the reference sum the same few thousand products in different orders, so round-off stays near
// 1e-15; 1e-12 leaves room and still catches any wrong coefficient. float32 against a float64
// result: about 1e-7 per operation, amplified by cancellation in sums of ~1e3 terms.
constexpr double kRelTolF64 = 1e-12;
constexpr double kRelTolF32 = 1e-5;

struct ScModel {
  std::string name;
  std::string path;
};
void PrintTo(const ScModel& m, std::ostream* os);

// The shared reference models (exported by the reference_models fixture) and the random models of
// the sc_models fixture (make_sc_models.py).
std::vector<ScModel> sc_test_models();
std::string sc_model(const std::string& name);  // path of a random model of the sc_models fixture

// Inputs of layer `layer`'s SC: A [n, C, K] ~ N(0, 1) and species uniform in [0, Z), float64, CPU.
struct ScInputs {
  at::Tensor A, species;
};
ScInputs random_sc_inputs(const ModelFile& file, int layer, int64_t n, uint64_t seed);

// A [n, C, K] (the reference's layout) as the executors read it, [n, C K] in mul_ir or, with
// d.input_ir_mul, ir_mul (sc_input_columns), and an executor's dA back to [n, C, K].
at::Tensor executor_layout(const ScDescriptor& d, const at::Tensor& A);
at::Tensor reference_layout(const ScDescriptor& d, const at::Tensor& a);

// The reference path's SC of one layer (src/model/symmetric_contraction.cpp, concatenated over the
// output blocks) with its tensors loaded once, in the given dtype and on the given device.
class ReferenceSc {
 public:
  ReferenceSc(const ModelFile& file, int layer, const at::TensorOptions& options);
  at::Tensor operator()(const at::Tensor& A, const at::Tensor& species) const;

 private:
  std::vector<ContractionWeights> blocks_;
};
// The same, loaded for one call, in the dtype and on the device of A.
at::Tensor reference_sc(const ModelFile& file, int layer, const at::Tensor& A, const at::Tensor& species);

// Passes when both are finite and max|got - want| <= rel_tol * max|want|.
::testing::AssertionResult all_close(const at::Tensor& got, const at::Tensor& want, double rel_tol);

}  // namespace flashmace::testing
