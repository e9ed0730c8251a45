// The fast engine's linears (engine/ops/irreps_linear.h, engine/ops/species_linear.h) against the
// reference path's e3nn_linear / element_linear and their autograd transposes, float64: adjacent and
// separated blocks of one irrep (stacked weights), outputs no input reaches, inputs no output reads,
// writing into and adding to column ranges of wider tensors, one and several elements; inputs and
// outputs in either column layout (mul_ir, ir_mul). The same on CUDA against the CPU:
// gpu/test_gpu_irreps_linear.cpp.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/ops/irreps_linear.h"
#include "engine/ops/species_linear.h"
#include "engine/test_irreps_linear_support.h"
#include "model/e3nn_ops.h"

namespace flashmace {
namespace {

using testing::Case;
using testing::kF64;
using testing::max_abs;
using testing::weight_count;

// The x-gradient of sum(f(x) * g) by autograd.
template <typename F>
at::Tensor autograd_transpose(F&& f, const at::Tensor& x, const at::Tensor& g) {
  const at::Tensor xg = x.clone().requires_grad_(true);
  (f(xg) * g).sum().backward();
  return xg.grad();
}

class IrrepsLinearCase : public ::testing::TestWithParam<Case> {};

TEST_P(IrrepsLinearCase, EqualsE3nnLinearAndItsTranspose) {
  const Irreps in = Irreps::parse(GetParam().in), out = Irreps::parse(GetParam().out);
  at::manual_seed(7);
  const at::Tensor w = at::randn({weight_count(in, out)}, kF64);
  const at::Tensor x = at::randn({11, in.dim()}, kF64), g = at::randn({11, out.dim()}, kF64);
  const IrrepsLinear f(w, in, out);
  const at::Tensor y = e3nn_linear(x, w, in, out);
  EXPECT_LT(max_abs(f.forward(x), y), 1e-13);
  const at::Tensor gx = autograd_transpose([&](const at::Tensor& t) { return e3nn_linear(t, w, in, out); }, x, g);
  EXPECT_LT(max_abs(f.transpose(g), gx), 1e-13);

  // Into column ranges of wider tensors (row stride != width), written and added.
  at::Tensor wide = at::full({11, out.dim() + 5}, 3.0, kF64);
  f.forward_into(x, wide.narrow(1, 2, out.dim()), /*accumulate=*/false);
  EXPECT_LT(max_abs(wide.narrow(1, 2, out.dim()), y), 1e-13);
  EXPECT_EQ(max_abs(wide.narrow(1, 0, 2), at::full({11, 2}, 3.0, kF64)), 0.0);  // untouched
  f.forward_into(x, wide.narrow(1, 2, out.dim()), /*accumulate=*/true);
  EXPECT_LT(max_abs(wide.narrow(1, 2, out.dim()), 2 * y), 1e-13);
  at::Tensor wide_in = at::ones({11, in.dim() + 3}, kF64);
  f.transpose_into(g, wide_in.narrow(1, 3, in.dim()), /*accumulate=*/true);
  EXPECT_LT(max_abs(wide_in.narrow(1, 3, in.dim()), gx + 1.0), 1e-13);
  f.transpose_into(g, wide_in.narrow(1, 3, in.dim()), /*accumulate=*/false);
  EXPECT_LT(max_abs(wide_in.narrow(1, 3, in.dim()), gx), 1e-13);
}

// x [n, dim(irreps)] in mul_ir -> the same values in `layout` (core/irreps.h's ir_mul_columns).
at::Tensor in_layout(const at::Tensor& x, const Irreps& irreps, IrrepsLayout layout) {
  if (layout == IrrepsLayout::MulIr) return x;
  const std::vector<int> columns = ir_mul_columns(irreps);
  std::vector<int64_t> source(columns.size());
  for (std::size_t j = 0; j < columns.size(); ++j) source[static_cast<std::size_t>(columns[j])] = static_cast<int64_t>(j);
  return x.index_select(1, at::tensor(source, at::TensorOptions().dtype(at::kLong)));
}

TEST_P(IrrepsLinearCase, ReadsAndWritesEitherLayout) {
  const Irreps in = Irreps::parse(GetParam().in), out = Irreps::parse(GetParam().out);
  at::manual_seed(8);
  const at::Tensor w = at::randn({weight_count(in, out)}, kF64);
  const at::Tensor x = at::randn({11, in.dim()}, kF64), g = at::randn({11, out.dim()}, kF64);
  const at::Tensor y = e3nn_linear(x, w, in, out);
  const at::Tensor gx = autograd_transpose([&](const at::Tensor& t) { return e3nn_linear(t, w, in, out); }, x, g);
  for (const IrrepsLayout a : {IrrepsLayout::MulIr, IrrepsLayout::IrMul})
    for (const IrrepsLayout b : {IrrepsLayout::MulIr, IrrepsLayout::IrMul}) {
      IrrepsLinear f(w, in, out);
      if (b == IrrepsLayout::IrMul && ir_mul_runs_span_blocks(out)) {
        EXPECT_THROW(f.set_layouts(a, b), Error);
        continue;
      }
      f.set_layouts(a, b);
      const std::string which = std::string(a == IrrepsLayout::IrMul ? "ir_mul" : "mul_ir") + " -> " +
                                (b == IrrepsLayout::IrMul ? "ir_mul" : "mul_ir");
      const at::Tensor xa = in_layout(x, in, a), yb = in_layout(y, out, b), gb = in_layout(g, out, b),
                       gxa = in_layout(gx, in, a);
      EXPECT_LT(max_abs(f.forward(xa), yb), 1e-13) << which;
      EXPECT_LT(max_abs(f.transpose(gb), gxa), 1e-13) << which;
      // into and onto column ranges of wider tensors
      at::Tensor wide = at::full({11, out.dim() + 5}, 3.0, kF64);
      f.forward_into(xa, wide.narrow(1, 2, out.dim()), /*accumulate=*/true);
      EXPECT_LT(max_abs(wide.narrow(1, 2, out.dim()), yb + 3.0), 1e-13) << which;
      at::Tensor wide_in = at::ones({11, in.dim() + 3}, kF64);
      f.transpose_into(gb, wide_in.narrow(1, 3, in.dim()), /*accumulate=*/true);
      EXPECT_LT(max_abs(wide_in.narrow(1, 3, in.dim()), gxa + 1.0), 1e-13) << which;
      EXPECT_EQ(max_abs(wide_in.narrow(1, 0, 3), at::ones({11, 3}, kF64)), 0.0) << which;  // untouched
    }
}

INSTANTIATE_TEST_SUITE_P(
    Irreps, IrrepsLinearCase,
    ::testing::Values(Case{"4x0e+3x1o", "4x0e+3x1o"},                        // MACE's linear_up shape
                      Case{"3x0e+2x0e+4x1o+4x1o+2x2e+1x3o", "5x0e+3x1o+2x2e"},  // adjacent paths, a 3o no one reads
                      Case{"2x0e+3x1o+2x0e+1x1o", "4x0e+2x1o"},              // separated blocks of one irrep
                      Case{"2x0e", "2x0e+3x1o"},                             // an output no input reaches
                      Case{"2x1o", "1x1o+3x1o+2x0e"},                        // adjacent outputs of one irrep
                      Case{"6x0e", "1x0e"}));                                // a readout

TEST(IrrepsLinear, RefusesWrongWeightCount) {
  const Irreps in = Irreps::parse("2x0e+2x1o"), out = Irreps::parse("3x0e");
  EXPECT_THROW(IrrepsLinear(at::zeros({7}, kF64), in, out), Error);
}

class SpeciesLinearCase : public ::testing::TestWithParam<bool> {};

TEST_P(SpeciesLinearCase, EqualsElementLinearAndItsTranspose) {
  const bool several = GetParam();
  const Irreps in = Irreps::parse("3x0e+2x1o"), out = Irreps::parse("4x0e+2x1o+1x2e");
  const int Z = 5;
  at::manual_seed(11);
  const at::Tensor w = at::randn({weight_count(in, out, Z)}, kF64);
  const int64_t n = 13;
  const at::Tensor species = several ? at::tensor(std::vector<int64_t>{3, 1, 3, 3, 4, 1, 1, 3, 4, 4, 3, 1, 1})
                                     : at::full({n}, 2, at::kLong);
  const std::vector<int64_t> present = elements_present(species);
  const SpeciesGroups groups = group_species(species, present);
  const at::Tensor x = at::randn({n, in.dim()}, kF64), g = at::randn({n, out.dim()}, kF64);
  const SpeciesLinear f(w, in, Z, out);
  const at::Tensor y = element_linear(x, species, w, in, Z, out);
  EXPECT_LT(max_abs(f.forward(x, groups), y), 1e-13);
  at::Tensor base = at::randn({n, out.dim()}, kF64);
  const at::Tensor expected_sum = base + y;
  f.forward_add(x, groups, base);
  EXPECT_LT(max_abs(base, expected_sum), 1e-13);
  const at::Tensor gx =
      autograd_transpose([&](const at::Tensor& t) { return element_linear(t, species, w, in, Z, out); }, x, g);
  EXPECT_LT(max_abs(f.transpose(g, groups), gx), 1e-13);

  // The same in ir_mul on both sides (the skip connection of the fast engine's node stage).
  SpeciesLinear h(w, in, Z, out);
  h.set_layouts(IrrepsLayout::IrMul, IrrepsLayout::IrMul);
  EXPECT_LT(max_abs(h.forward(in_layout(x, in, IrrepsLayout::IrMul), groups), in_layout(y, out, IrrepsLayout::IrMul)),
            1e-13);
  EXPECT_LT(
      max_abs(h.transpose(in_layout(g, out, IrrepsLayout::IrMul), groups), in_layout(gx, in, IrrepsLayout::IrMul)),
      1e-13);
}

INSTANTIATE_TEST_SUITE_P(Elements, SpeciesLinearCase, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Several" : "One"; });

}  // namespace
}  // namespace flashmace
