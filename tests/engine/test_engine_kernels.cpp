// The fast engine's small fused operations on the CPU against independent truth:
// - graph checks (engine/ops/graph_checks.h): equal / unequal int64 arrays (a difference in the last
//   element of the longest array, sizes that differ) and exact negation of paired vectors;
// - per-atom sums (engine/step/atom_sums.h): forces and virial from edge gradients against plain
//   loops over the edges, with padding edges and atoms.
// - the reassociated first layer's per-edge sums (engine/ops/first_layer.h, species_outer_cpu_rows.h)
//   on every instruction set this machine runs, against index_add of outer products in float64; its
//   per-row GEMMs against the definition (einsum over the Wigner-3j entries) and their backward as
//   the adjoint, with harmonics no path reads;
// - flashmace's CPU GEMM for the radial MLP's output layer (radial_mm, kernels/cpu_gemm.h) on every
//   instruction set against one float64 at::mm, the same bits on several thread counts.
// The checks: engine/test_engine_kernels_support.h. The same on CUDA, and the first layer's CUDA
// kernels: gpu/test_gpu_engine_kernels.cpp.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "core/irreps.h"
#include "cpu_isa_support.h"
#include "engine/kernels/conv_tp_descriptor.h"
#include "engine/ops/edge_terms.h"
#include "engine/ops/first_layer.h"
#include "engine/test_engine_kernels_support.h"

namespace flashmace {
namespace {

using testing::check_atom_sums;
using testing::check_equality;

TEST(GraphChecks, EqualityAndNegationOnCpu) { check_equality(at::kCPU); }

TEST(AtomSums, ForcesAndVirialOnCpu) { check_atom_sums(at::kCPU); }

// S[j, row, z, k] = sum over the row's edges with slot z of h[e, k] Y[e, j], and its backward
// dh[e, k] = sum_j dS[j, row, z, k] Y[e, j], dY[e, j] = sum_k h[e, k] dS[j, row, z, k], for harmonics
// up to l = lmax and H hidden values (vector tails when H or J do not fill whole vectors), slots in
// runs and interleaved, rows without edges, h rows shared through h_index.
void check_first_layer_sums(int lmax, int64_t H, at::ScalarType dtype, double tolerance) {
  const Irreps in1 = Irreps::parse("4x0e"), sh = Irreps::spherical_harmonics(lmax);
  const FirstLayerOp op(ConvTPDescriptor::build(in1, sh, conv_tp_layout(in1, sh, sh)),
                        at::randn({H, 4 * sh.dim()}, at::TensorOptions().dtype(dtype)));
  const std::vector<int64_t> counts = {5, 0, 31, 1, 0, 14, 3, 80};
  const int64_t nrows = static_cast<int64_t>(counts.size()), Z = 3, J = sh.dim();
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const at::Tensor count = at::tensor(counts, i64);
  const at::Tensor row_ptr = at::cat({at::zeros({1}, i64), at::cumsum(count, 0)});
  const int64_t E = count.sum().item<int64_t>();
  const at::Tensor row = at::repeat_interleave(at::arange(nrows, i64), count);
  const at::Tensor h = at::randn({E, H}, at::kDouble), Y = at::randn({E, J}, at::kDouble);
  at::Tensor slot = at::randint(0, Z, {E}, i64);
  slot.narrow(0, 5, 31).fill_(1);  // row 2: one run
  const at::Tensor h_index = at::randperm(E, i64), dS = at::randn({J, nrows, Z, H}, at::kDouble);
  const at::Tensor cell = row * Z + slot;
  for (const at::Tensor& index : {at::Tensor(), h_index}) {
    const at::Tensor he = index.defined() ? h.index_select(0, index) : h;
    const at::Tensor S_ref = at::zeros({nrows * Z, H, J}, at::kDouble)
                                 .index_add_(0, cell, he.unsqueeze(2) * Y.unsqueeze(1))
                                 .view({nrows, Z, H, J})
                                 .permute({3, 0, 1, 2});
    const at::Tensor dSe = dS.permute({1, 2, 3, 0}).reshape({nrows * Z, H, J}).index_select(0, cell);
    const at::Tensor dh_ref = (dSe * Y.unsqueeze(1)).sum(2), dY_ref = (dSe * he.unsqueeze(2)).sum(1);
    const at::Tensor S =
        op.sums(h.to(dtype), Y.to(dtype), slot, row_ptr, nrows, Z, index.defined() ? index : at::Tensor());
    const auto [dh, dY] = op.sums_backward(dS.to(dtype), h.to(dtype), Y.to(dtype), slot, row_ptr,
                                           index.defined() ? index : at::Tensor());
    EXPECT_LT(testing::relative_error(S.to(at::kDouble), S_ref), tolerance) << "S, l <= " << lmax << ", H " << H;
    EXPECT_LT(testing::relative_error(dh.to(at::kDouble), dh_ref), tolerance) << "dh, l <= " << lmax << ", H " << H;
    EXPECT_LT(testing::relative_error(dY.to(at::kDouble), dY_ref), tolerance) << "dY, l <= " << lmax << ", H " << H;
  }
}

TEST(FirstLayerSums, EveryInstructionSetMatchesOuterProducts) {
  testing::for_each_cpu_isa([](CpuIsa) {
    for (int lmax = 0; lmax <= 4; ++lmax)
      for (const int64_t H : {64, 13}) {
        check_first_layer_sums(lmax, H, at::kDouble, 1e-14);
        check_first_layer_sums(lmax, H, at::kFloat, 2e-6);
      }
  });
}

// agg[row, mid_p + u d3 + m3] = sum_{entries (m2, m3, c) of p} alpha c sum_z x[z, x_p + u]
//   sum_k W[k, w_p + u] S[y_p + m2, row, z, k], and <dagg, agg(S)> = <aggregate_backward(dagg), S>.
void check_first_layer_aggregate(const Irreps& out) {
  const Irreps in1 = Irreps::parse("6x0e"), sh = Irreps::spherical_harmonics(3);
  const ConvTPDescriptor d = ConvTPDescriptor::build(in1, sh, conv_tp_layout(in1, sh, out));
  const int64_t Z = 3, H = 5, n = 7;
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor w = at::randn({H, d.weight_numel}, f64), x = at::randn({Z, d.dim_in1}, f64);
  const at::Tensor S = at::randn({d.dim_sh, n, Z, H}, f64), dagg = at::randn({n, d.dim_mid}, f64);
  const FirstLayerOp op(d, w);
  at::Tensor ref = at::zeros({n, d.dim_mid}, f64);
  for (const ConvTPPathDescriptor& p : d.paths) {
    const at::Tensor xp = x.narrow(1, p.x_offset, p.mul), wp = w.narrow(1, p.w_offset, p.mul);
    const at::Tensor t = at::einsum("zu,ku,mrzk->rum", {xp, wp, S.narrow(0, p.y_offset, p.d2)});  // [n, mul, d2]
    at::Tensor c = at::zeros({p.d2, p.d3}, f64);
    for (int i = p.entry_begin; i < p.entry_end; ++i) c[d.entries[i].m2][d.entries[i].m3] = p.alpha * d.entries[i].c;
    ref.narrow(1, p.mid_offset, p.mul * p.d3).copy_(at::matmul(t, c).reshape({n, p.mul * p.d3}));
  }
  EXPECT_LT(testing::relative_error(op.aggregate(S, x), ref), 1e-14) << out.str();
  const at::Tensor dS = op.aggregate_backward(dagg, x, H);
  ASSERT_EQ(dS.sizes(), S.sizes());
  const double lhs = (dagg * ref).sum().item<double>(), rhs = (dS * S).sum().item<double>();
  EXPECT_NEAR(lhs, rhs, 1e-12 * std::abs(lhs)) << out.str();
  EXPECT_TRUE(std::isfinite(lhs) && std::isfinite(rhs));
  // harmonics no path reads get zero gradients
  for (int j = 0; j < d.dim_sh; ++j) {
    bool read = false;
    for (const ConvTPPathDescriptor& p : d.paths) read = read || (j >= p.y_offset && j < p.y_offset + p.d2);
    if (!read) EXPECT_EQ(dS[j].abs().max().item<double>(), 0.0) << "harmonic " << j << ", " << out.str();
  }
}

TEST(FirstLayerAggregate, GemmsMatchTheDefinitionAndTheBackwardIsTheirAdjoint) {
  check_first_layer_aggregate(Irreps::parse("0e+1o+2e+3o"));
  check_first_layer_aggregate(Irreps::parse("0e+2e"));  // harmonics of l = 1 and 3 unread
}

// The projection folded into the per-path GEMMs equals the projection of the aggregate, written or
// added into rows with a stride, and its backward equals aggregate_backward of the projection's
// transpose. target: the projection's output irreps (blocks no path reaches are zero).
void check_first_layer_projection(const Irreps& mid, const Irreps& target) {
  const Irreps in1 = Irreps::parse("6x0e"), sh = Irreps::spherical_harmonics(3);
  const ConvTPDescriptor d = ConvTPDescriptor::build(in1, sh, conv_tp_layout(in1, sh, mid));
  const int64_t Z = 3, H = 5, n = 7;
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor w = at::randn({H, d.weight_numel}, f64), x = at::randn({Z, d.dim_in1}, f64);
  const at::Tensor S = at::randn({d.dim_sh, n, Z, H}, f64);
  const Irreps mid_irreps = conv_tp_layout(in1, sh, mid).mid;
  int64_t numel = 0;
  for (const auto& o : target.blocks())
    for (const auto& i : mid_irreps.blocks())
      if (i.ir == o.ir) numel += static_cast<int64_t>(i.mul) * o.mul;
  const IrrepsLinear project(at::randn({numel}, f64), mid_irreps, target);
  FirstLayerOp op(d, w);
  ASSERT_TRUE(op.fold_projection(project)) << mid.str();
  const at::Tensor ref = project.forward(op.aggregate(S, x));
  const at::Tensor wide = at::full({n, target.dim() + 3}, 7.0, f64), y = wide.narrow(1, 2, target.dim());
  op.project_into(S, x, y, /*accumulate=*/false);
  EXPECT_LT(testing::relative_error(y, ref), 1e-14) << mid.str() << " -> " << target.str();
  op.project_into(S, x, y, /*accumulate=*/true);
  EXPECT_LT(testing::relative_error(y, 2 * ref), 1e-14) << "accumulated, " << target.str();
  EXPECT_EQ(wide.narrow(1, 0, 2).eq(7.0).all().item<bool>(), true) << "columns outside the rows touched";
  const at::Tensor dy = at::randn({n, target.dim()}, f64);
  const at::Tensor dS = op.project_backward(dy, x, H), dS_ref = op.aggregate_backward(project.transpose(dy), x, H);
  ASSERT_EQ(dS.sizes(), S.sizes());
  EXPECT_LT(testing::relative_error(dS, dS_ref), 1e-14) << "dS, " << target.str();
}

TEST(FirstLayerAggregate, FoldedProjectionEqualsTheProjectedAggregate) {
  check_first_layer_projection(Irreps::parse("0e+1o+2e+3o"), Irreps::parse("4x0e+4x1o+4x2e+4x3o"));
  check_first_layer_projection(Irreps::parse("0e+1o+2e+3o"), Irreps::parse("5x0e+3x1o"));  // 2e, 3o unprojected
  check_first_layer_projection(Irreps::parse("0e+2e"), Irreps::parse("2x0e+2x1o+3x2e"));   // 1o no path reaches
}

// flashmace's CPU GEMM (radial_mm, kernels/cpu_gemm.h) on every instruction set this processor runs:
// float64 equals one at::mm to round-off for shapes with partial register tiles, row blocks and panels
// (M, N not multiples of 6, 12 or a panel's width), with b contiguous and as a transposed view, and a
// strided a; the same bits on 1, 2, 3 and 5 threads; float32 within its round-off of float64.
TEST(RadialMlp, CpuGemmEqualsAtenOnEveryInstructionSet) {
  const int threads = at::get_num_threads();
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const std::vector<std::array<int64_t, 3>> shapes{{1, 1, 1},        {7, 5, 3},   {13, 100, 64}, {701, 1280, 64},
                                                   {2600, 64, 1280}, {97, 33, 8}, {12, 17, 129}};
  testing::for_each_cpu_isa([&](CpuIsa isa) {
    for (const auto& [M, N, K] : shapes) {
      const at::Tensor a = at::randn({M, K + 3}, f64).narrow(1, 1, K);  // rows with a stride of K + 3
      const at::Tensor w = at::randn({K, N}, f64), wt = at::randn({N, K}, f64);
      const std::string what =
          std::string(cpu_isa_name(isa)) + " " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
      EXPECT_LT(testing::relative_error(radial_mm(a, w), at::mm(a, w)), 1e-14) << what;
      const at::Tensor ref_t = at::mm(a, wt.t());
      at::Tensor first;
      for (const int k : {1, 2, 3, 5}) {
        at::set_num_threads(k);
        const at::Tensor c = radial_mm(a, wt.t());
        EXPECT_LT(testing::relative_error(c, ref_t), 1e-14) << what << ", b transposed, " << k << " threads";
        if (!first.defined()) first = c;
        EXPECT_TRUE(at::equal(c, first)) << what << ": " << k << " threads differ from 1";
      }
      at::set_num_threads(threads);
      const at::Tensor c32 = radial_mm(a.to(at::kFloat), wt.to(at::kFloat).t());
      EXPECT_EQ(c32.scalar_type(), at::kFloat);
      EXPECT_LT(testing::relative_error(c32.to(at::kDouble), ref_t), 1e-5) << what << ", float32";
    }
  });
}

}  // namespace
}  // namespace flashmace
