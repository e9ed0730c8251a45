// The fast engine's small fused operations on CUDA against independent truth:
// - graph checks (engine/ops/graph_checks.h) and per-atom sums (engine/step/atom_sums.h), as on the
//   CPU (engine/test_engine_kernels.cpp; the checks: engine/test_engine_kernels_support.h);
// - the reassociated first layer on CUDA (engine/ops/first_layer.h: the per-edge sums' kernels, the
//   per-path GEMMs) against the CPU (the row kernels of the per-edge sums, MKL's GEMMs), float64 and
//   float32, bit for bit on a repeat.
// Skipped, and reported as skipped, where no GPU or no CUDA kernels exist.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/irreps.h"
#include "engine/kernels/conv_tp_descriptor.h"
#include "engine/ops/first_layer.h"
#include "engine/test_engine_kernels_support.h"
#include "test_support.h"

namespace flashmace {
namespace {

using testing::check_atom_sums;
using testing::check_equality;
using testing::gpu_kernels_available;
using testing::relative_error;

at::Device gpu() { return at::Device(at::kCUDA, 0); }

TEST(GraphChecksGpu, EqualityAndNegationOnCuda) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_equality(gpu());
}

TEST(AtomSumsGpu, ForcesAndVirialOnCuda) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_atom_sums(gpu());
}

// A first layer of MACE's shape: scalar inputs for Z species slots, H hidden channels, harmonics up to
// l = 3, outputs 0e + 1o + 2e + 3o; rows with and without edges, slots in runs and interleaved, rows
// of h shared by edge pairs through h_index.
struct FirstLayerCase {
  ConvTPDescriptor d;
  at::Tensor w_out, x, h, h_index, Y, slot, row_ptr, dagg;
  int64_t nrows = 0;
};

FirstLayerCase first_layer_case(at::ScalarType dtype, int64_t Z, int64_t H) {
  const Irreps in1 = Irreps::parse("24x0e"), sh = Irreps::spherical_harmonics(3);
  FirstLayerCase c;
  c.d = ConvTPDescriptor::build(in1, sh, conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e+3o")));
  const std::vector<int64_t> counts = {5, 0, 9, 1, 0, 14, 3, 7};
  c.nrows = static_cast<int64_t>(counts.size());
  const auto f = at::TensorOptions().dtype(dtype);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const at::Tensor count = at::tensor(counts, i64);
  c.row_ptr = at::cat({at::zeros({1}, i64), at::cumsum(count, 0)});
  const int64_t E = count.sum().item<int64_t>();
  c.w_out = at::randn({H, c.d.weight_numel}, f);
  c.x = at::randn({Z, c.d.dim_in1}, f);
  c.h = at::randn({E, H}, f);
  c.h_index = at::randperm(E, i64);
  c.Y = at::randn({E, c.d.dim_sh}, f);
  c.slot = at::randint(0, Z, {E}, i64);
  c.slot.narrow(0, 5, 9).fill_(1);  // a run of one slot: row 2
  c.dagg = at::randn({c.nrows, c.d.dim_mid}, f);
  return c;
}

void check_first_layer_on_cuda(at::ScalarType dtype, double tolerance, int64_t slots, int64_t hidden) {
  const FirstLayerCase c = first_layer_case(dtype, slots, hidden);
  const auto cuda = [](const at::Tensor& t) { return t.to(gpu()); };
  const FirstLayerOp cpu_op(c.d, c.w_out), gpu_op(c.d, cuda(c.w_out));
  const int64_t Z = c.x.size(0);
  for (const at::Tensor& h_index : {at::Tensor(), c.h_index}) {
    const at::Tensor S = cpu_op.sums(c.h, c.Y, c.slot, c.row_ptr, c.nrows, Z, h_index);
    const at::Tensor S_gpu = gpu_op.sums(cuda(c.h), cuda(c.Y), cuda(c.slot), cuda(c.row_ptr), c.nrows, Z,
                                         h_index.defined() ? cuda(h_index) : at::Tensor());
    // The GPU sums in double (Y staged as double) and rounds at each flush of a slot's run: against
    // the same sums in double on the CPU (from the same inputs) it is within half a float32 ulp per
    // flush in float32 (this case's interleaved slots flush a slot up to 7 times per row; the
    // engine's edges, sorted by sender element, once), and equal to round-off in float64.
    const FirstLayerOp cpu64_op(c.d, c.w_out.to(at::kDouble));
    const auto f64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
    const at::Tensor S64 = cpu64_op.sums(f64(c.h), f64(c.Y), c.slot, c.row_ptr, c.nrows, Z, h_index);
    EXPECT_LT(relative_error(S_gpu.to(at::kDouble), S64), dtype == at::kDouble ? 1e-15 : 5e-7) << at::toString(dtype);
    const auto [dh, dY] = cpu_op.sums_backward(S, c.h, c.Y, c.slot, c.row_ptr, h_index);
    const auto [dh_gpu, dY_gpu] = gpu_op.sums_backward(cuda(S), cuda(c.h), cuda(c.Y), cuda(c.slot), cuda(c.row_ptr),
                                                       h_index.defined() ? cuda(h_index) : at::Tensor());
    EXPECT_LT(relative_error(dh_gpu, dh), tolerance) << at::toString(dtype);
    EXPECT_LT(relative_error(dY_gpu, dY), tolerance) << at::toString(dtype);
  }
  const at::Tensor S = at::randn({c.d.dim_sh, c.nrows, Z, c.h.size(1)}, c.h.options());
  EXPECT_LT(relative_error(gpu_op.aggregate(cuda(S), cuda(c.x)), cpu_op.aggregate(S, c.x)), tolerance);
  EXPECT_LT(relative_error(gpu_op.aggregate_backward(cuda(c.dagg), cuda(c.x), c.h.size(1)),
                           cpu_op.aggregate_backward(c.dagg, c.x, c.h.size(1))),
            tolerance);
  // Deterministic: bit for bit on a repeat.
  EXPECT_TRUE(at::equal(gpu_op.aggregate_backward(cuda(c.dagg), cuda(c.x), c.h.size(1)),
                        gpu_op.aggregate_backward(cuda(c.dagg), cuda(c.x), c.h.size(1))));
}

TEST(FirstLayerGpu, KernelsMatchTheCpuFormulation) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  // 3 slots of 8 channels; 8 slots of MACE-MP-0's 64, whose dS slabs the float32 backward stages in
  // shared memory and the float64 one does not (a thread per edge)
  for (const auto& [slots, hidden] : {std::pair<int64_t, int64_t>{3, 8}, {8, 64}}) {
    check_first_layer_on_cuda(at::kDouble, 1e-13, slots, hidden);
    check_first_layer_on_cuda(at::kFloat, 1e-5, slots, hidden);
  }
}

}  // namespace
}  // namespace flashmace
