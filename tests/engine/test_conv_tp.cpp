// The fused conv TP kernels (engine/conv_tp_kernels.h through engine/conv_tp_op.h) equal the
// reference path: conv_tensor_product on gathered features, index_add over receivers, and autograd
// for dR, dY, dx; for the shared reference models' layers and random irreps up to l = 3, receiver
// segments with empty rows, single edges and many edges, x indexed by sender and by species; float32
// within float32 round-off of float64; on the CPU and (skipped without one) a CUDA GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <utility>

#include "core/model_file.h"
#include "engine/conv_tp_codegen.h"
#include "engine/conv_tp_op.h"
#include "engine/conv_tp_specialized.h"
#include "engine/test_conv_tp_support.h"
#include "model/device.h"
#include "model/mace_params.h"
#include "sc/sc_nvrtc.h"
#include "test_support.h"

namespace flashmace {
namespace {

using testing::ConvTPProblem;
using testing::gpu_kernels_available;
using testing::ConvTPReference;

// float64: the kernels and the reference differ only in summation order (a few ulps per element,
// relative to the largest element).
constexpr double kRelTolF64 = 1e-12;
// float32 against float64: float32 round-off (6e-8) times the depth of the sums (<= a few hundred terms).
constexpr double kRelTolF32 = 1e-5;

// max |got - want| / max |want|; a failure (and infinity) if either holds a NaN or Inf, or the shapes differ.
double relative_error(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  const at::Tensor g = got.to(at::kCPU, at::kDouble), w = want.to(at::kCPU, at::kDouble);
  if (g.sizes() != w.sizes()) {
    ADD_FAILURE() << what << ": shape " << g.sizes() << " vs " << w.sizes();
    return INFINITY;
  }
  if (!at::isfinite(g).all().item<bool>() || !at::isfinite(w).all().item<bool>()) {
    ADD_FAILURE() << what << ": NaN or Inf";
    return INFINITY;
  }
  if (w.numel() == 0) return 0;
  const double scale = w.abs().max().item<double>();
  const double diff = (g - w).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

struct Results {
  at::Tensor agg, dR, dY, dx;
};

// The kernels on p (its dtype and device); dx accumulated onto a non-zero start and returned minus it.
// specialize: on CUDA, the generated kernels (required to be available) instead of the table-driven ones.
// radial_index: p.R holds shared rows, edge e uses row radial_index[e].
// dR_by_row: dR summed per radial row (at most two edges per row).
Results run_kernels(const ConvTPProblem& p, bool specialize = false, const at::Tensor& radial_index = {},
                    bool dR_by_row = false) {
  const ConvTPOp op(ConvTPDescriptor::build(p.in1, p.sh, p.layout), p.x.options(), specialize);
  if (specialize && p.x.is_cuda()) {
    EXPECT_NE(op.specialized(), nullptr) << "specialised kernels not built";
  }
  Results r;
  r.agg = conv_tp_aggregate(op, p.x, p.xindex, p.Y, p.R, p.row_ptr, p.nrows, radial_index);
  const at::Tensor dx0 = at::full_like(p.x, 0.25);
  at::Tensor dx = dx0.clone();
  const ConvTPEdgeGrads g = conv_tp_aggregate_backward(op, p.dagg, p.x, p.xindex, p.Y, p.R, p.row_ptr, dx,
                                                       xindex_csr(p.xindex, p.num_x), radial_index, dR_by_row);
  r.dR = g.dR;
  r.dY = g.dY;
  r.dx = dx - dx0;
  return r;
}

// The worst relative error seen per tolerance, printed by each test (the margin under the tolerance).
std::map<double, double> worst;

void expect_matches(const Results& got, const ConvTPReference& want, double tol, const std::string& what) {
  const std::pair<const char*, std::pair<at::Tensor, at::Tensor>> outputs[] = {
      {"agg", {got.agg, want.agg}}, {"dR", {got.dR, want.dR}}, {"dY", {got.dY, want.dY}}, {"dx", {got.dx, want.dx}}};
  for (const auto& [name, gw] : outputs) {
    const double err = relative_error(gw.first, gw.second, what + " " + name);
    EXPECT_LE(err, tol) << what << " " << name;
    worst[tol] = std::max(worst[tol], err);
  }
}

void print_worst() {
  for (const auto& [tol, err] : worst) std::printf("worst relative error %.3g (tolerance %.0e)\n", err, tol);
  worst.clear();
}

// Receiver-segment patterns (edges per row).
std::vector<std::pair<std::string, std::vector<int64_t>>> segment_patterns(std::mt19937& rng) {
  std::vector<int64_t> mixed(23);
  std::uniform_int_distribution<int64_t> count(0, 6);
  for (auto& c : mixed) c = count(rng);
  mixed.front() = 0;
  mixed.back() = 0;
  mixed[5] = 1;
  return {{"mixed", mixed},
          {"one_edge_per_row", std::vector<int64_t>(9, 1)},
          {"many_in_one_row", {0, 0, 157, 0, 3}},
          {"no_edges", {0, 0, 0}}};
}

// Checks every pattern, x by sender (many rows) and by species (3 rows), float64 and float32.
void check_layout(const Irreps& in1, const Irreps& sh, const ConvTPLayout& layout, const at::Device& device,
                  uint64_t seed, const std::string& name, bool specialize = false) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  for (const auto& [pattern, counts] : segment_patterns(rng))
    for (const auto& [xname, num_x] : {std::pair<std::string, int64_t>{"sender", 17}, {"species", 3}}) {
      const std::string what = name + "/" + pattern + "/" + xname;
      const ConvTPProblem p64 = testing::make_conv_tp_problem(in1, sh, layout, counts, num_x, seed++);
      const ConvTPReference ref = testing::conv_tp_reference(p64);
      const Results got64 =
          run_kernels(testing::convert(p64, at::TensorOptions().dtype(at::kDouble).device(device)), specialize);
      expect_matches(got64, ref, kRelTolF64, what + " float64");
      const Results got32 =
          run_kernels(testing::convert(p64, at::TensorOptions().dtype(at::kFloat).device(device)), specialize);
      expect_matches(got32, ref, kRelTolF32, what + " float32");
    }
  print_worst();
}

// Random irreps with l <= 3, random multiplicities (so paths differ in mul) and parities.
struct RandomLayout {
  Irreps in1, sh;
  ConvTPLayout layout;
};
RandomLayout random_layout(std::mt19937& rng) {
  std::uniform_int_distribution<int> mul(1, 6), coin(0, 1), lmax(1, 3);
  for (;;) {
    std::vector<MulIr> in, target;
    for (int l = 0; l <= 3; ++l)
      for (int p : {1, -1}) {
        if (coin(rng)) in.push_back({mul(rng), {l, p}});
        if (coin(rng)) target.push_back({1, {l, p}});
      }
    RandomLayout r{Irreps(in), Irreps::spherical_harmonics(lmax(rng)), {}};
    if (in.empty() || target.empty()) continue;
    r.layout = conv_tp_layout(r.in1, r.sh, Irreps(target));
    if (!r.layout.paths.empty()) return r;
  }
}

void check_reference_models(const at::Device& device) {
  for (const std::string model : {"scalar_l0", "small_l1", "large_l2"}) {
    const MaceParams m = MaceParams::load(ModelFile::load(testing::exported_model(model)), at::kDouble, at::kCPU);
    for (std::size_t t = 0; t < m.layers.size(); ++t)
      check_layout(m.layers[t].in, m.sh, m.layers[t].tp, device, 100 + t, model + " layer " + std::to_string(t));
  }
}

void check_random_layouts(const at::Device& device) {
  std::mt19937 rng(2024);
  for (int k = 0; k < 12; ++k) {
    const RandomLayout r = random_layout(rng);
    check_layout(r.in1, r.sh, r.layout, device, 1000 + 10 * k,
                 r.in1.str() + " x " + r.sh.str() + " -> " + r.layout.mid.str());
  }
}

// Layouts the code generator specialises (every path of one multiplicity, a multiple of 32): MACE's
// first and later layers, padded harmonics (9 -> 16), several warps per row, odd-parity inputs.
struct NamedLayout {
  std::string name;
  Irreps in1, sh;
  ConvTPLayout layout;
};
std::vector<NamedLayout> specializable_layouts() {
  std::vector<NamedLayout> out;
  const auto add = [&](const std::string& in, int lmax, const std::string& target) {
    const Irreps in1 = Irreps::parse(in), sh = Irreps::spherical_harmonics(lmax);
    out.push_back({in + " x sh" + std::to_string(lmax) + " -> " + target, in1, sh,
                   conv_tp_layout(in1, sh, Irreps::parse(target))});
  };
  add("32x0e", 3, "0e+1o+2e+3o");
  add("64x0e+64x1o", 3, "0e+1o+2e+3o");
  add("32x0e+32x1o+32x2e", 2, "0e+1o+2e");
  add("32x1o+32x1e", 1, "0e+1o+1e");
  return out;
}

TEST(ConvTPDescriptor, KeepsOnlyStructuralNonZerosWithAlpha) {
  const Irreps in1 = Irreps::parse("4x0e+4x1o"), sh = Irreps::spherical_harmonics(2);
  const ConvTPDescriptor d = ConvTPDescriptor::build(in1, sh, conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e")));
  ASSERT_FALSE(d.paths.empty());
  for (const ConvTPPathDescriptor& p : d.paths) {
    EXPECT_DOUBLE_EQ(p.alpha, std::sqrt(static_cast<double>(p.d3)));
    EXPECT_GT(p.entry_end, p.entry_begin);
    EXPECT_LT(p.entry_end - p.entry_begin, p.d1 * p.d2 * p.d3 + 1);
    if (p.d1 == 3 && p.d2 == 3 && p.d3 == 1) {
      EXPECT_EQ(p.entry_end - p.entry_begin, 3);  // mace_spec.md 5.4: C^{110} has three non-zeros
    }
  }
  EXPECT_EQ(d.weight_numel, conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e")).weight_numel);
}

TEST(ConvTPCodegen, SpecializableLayoutsCompileWithNvrtc) {
  if (std::string why; !nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const NamedLayout& l : specializable_layouts()) {
    const ConvTPDescriptor d = ConvTPDescriptor::build(l.in1, l.sh, l.layout);
    ASSERT_EQ(conv_tp_specialization_unsupported(d), "") << l.name;
    const std::string src = generate_conv_tp_cuda_source(d);
    EXPECT_EQ(src, generate_conv_tp_cuda_source(d)) << "not deterministic: " << l.name;
    const ScCubin c = compile_cubin(src, "sm_90");
    EXPECT_TRUE(c) << l.name << ": " << c.error;
  }
}

TEST(ConvTPCodegen, NamesWhatItCannotSpecialize) {
  const Irreps sh = Irreps::spherical_harmonics(2);
  const auto why = [&](const std::string& in, const std::string& target) {
    const Irreps in1 = Irreps::parse(in);
    return conv_tp_specialization_unsupported(
        ConvTPDescriptor::build(in1, sh, conv_tp_layout(in1, sh, Irreps::parse(target))));
  };
  EXPECT_NE(why("32x0e+16x1o", "0e+1o").find("different multiplicities"), std::string::npos);
  EXPECT_NE(why("16x0e", "0e+1o").find("not a multiple of 32"), std::string::npos);
  const Irreps in1 = Irreps::parse("32x0e"), sh6 = Irreps::spherical_harmonics(6);
  EXPECT_NE(conv_tp_specialization_unsupported(
                ConvTPDescriptor::build(in1, sh6, conv_tp_layout(in1, sh6, Irreps::parse("0e"))))
                .find("more than 32"),
            std::string::npos);
}

TEST(ConvTPKernelsCpu, ReferenceModelsMatchReferencePath) { check_reference_models(at::kCPU); }
TEST(ConvTPKernelsCpu, RandomIrrepsMatchReferencePath) { check_random_layouts(at::kCPU); }

TEST(ConvTPKernelsCpu, RejectsMismatchedTensors) {
  const Irreps in1 = Irreps::parse("2x0e+2x1o"), sh = Irreps::spherical_harmonics(1);
  const ConvTPLayout layout = conv_tp_layout(in1, sh, Irreps::parse("0e+1o"));
  const ConvTPProblem p = testing::make_conv_tp_problem(in1, sh, layout, {1, 2}, 4, 7);
  const ConvTPOp op(ConvTPDescriptor::build(in1, sh, layout), p.x.options());
  EXPECT_NE(testing::error_of([&] {
              conv_tp_aggregate(op, p.x.to(at::kFloat), p.xindex, p.Y, p.R, p.row_ptr, 2);
            }).find("'x_table' has dtype"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              conv_tp_aggregate(op, p.x, p.xindex, p.Y, p.R, p.row_ptr.narrow(0, 0, 2), 1);
            }).find("row_ptr must run from 0"),
            std::string::npos);
}

// Edges sharing radial rows through an index give exactly the results of each edge holding a copy
// of its row (the kernels read the same numbers): the radial-MLP pairing of the fast engine; with
// pairs, dR can also come summed per row.
// p with the radial rows `rows` copied to every edge (first) and shared through `index` (second).
std::pair<ConvTPProblem, ConvTPProblem> share_radial_rows(ConvTPProblem p, const at::Tensor& rows,
                                                          const at::Tensor& index, const at::TensorOptions& options) {
  p.R = rows.index_select(0, index);
  ConvTPProblem expanded = testing::convert(p, options);
  ConvTPProblem indexed = expanded;
  indexed.R = rows.to(options);
  return {expanded, indexed};
}

void check_radial_index(const at::Device& device, bool specialize) {
  const Irreps in1 = Irreps::parse("32x0e+32x1o"), sh = Irreps::spherical_harmonics(3);
  const ConvTPLayout layout = conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e+3o"));
  const ConvTPProblem p = testing::make_conv_tp_problem(in1, sh, layout, {3, 0, 5, 1, 7, 2}, 9, 21);
  const int64_t E = p.Y.size(0), U = 6;
  const at::Tensor shared = p.R.narrow(0, 0, U).clone();
  const at::Tensor index = at::remainder(at::arange(E, p.xindex.options()) * 5, U);
  // Rows shared by at most two edges (reverse-edge pairs), for dR summed per row.
  const int64_t pairs = (E + 1) / 2;
  const at::Tensor pair_rows = p.R.narrow(0, 0, pairs).clone();
  const at::Tensor pair_index = at::div(at::randperm(E, p.xindex.options()), 2, "floor");
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    const auto options = at::TensorOptions().dtype(dtype).device(device);
    {
      const auto [expanded, indexed] = share_radial_rows(p, shared, index, options);
      const Results a = run_kernels(expanded, specialize), b = run_kernels(indexed, specialize, index.to(device));
      EXPECT_TRUE(at::equal(a.agg, b.agg)) << dtype;
      EXPECT_TRUE(at::equal(a.dR, b.dR)) << dtype;
      EXPECT_TRUE(at::equal(a.dY, b.dY)) << dtype;
      EXPECT_TRUE(at::equal(a.dx, b.dx)) << dtype;
    }
    // dR summed per row is the per-edge dR added up in edge order, bit for bit, whatever order the
    // device adds in.
    const auto [expanded, indexed] = share_radial_rows(p, pair_rows, pair_index, options);
    const Results a = run_kernels(expanded, specialize),
                  b = run_kernels(indexed, specialize, pair_index.to(device), /*dR_by_row=*/true);
    const at::Tensor summed =
        at::zeros({pairs, a.dR.size(1)}, a.dR.options().device(at::kCPU)).index_add_(0, pair_index, a.dR.cpu());
    EXPECT_EQ(b.dR.size(0), pairs) << dtype;
    EXPECT_TRUE(at::equal(b.dR.cpu(), summed)) << dtype;
    EXPECT_TRUE(at::equal(a.agg, b.agg)) << dtype;
    EXPECT_TRUE(at::equal(a.dY, b.dY)) << dtype;
    EXPECT_TRUE(at::equal(a.dx, b.dx)) << dtype;
  }
}

TEST(ConvTPKernelsCpu, RadialIndexEqualsExpandedRadialsBitwise) { check_radial_index(at::kCPU, false); }

TEST(ConvTPKernelsGpu, RadialIndexEqualsExpandedRadialsBitwise) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_radial_index(at::Device(at::kCUDA, 0), false);
}

TEST(ConvTPSpecializedGpu, RadialIndexEqualsExpandedRadialsBitwise) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_radial_index(at::Device(at::kCUDA, 0), true);
}

TEST(ConvTPKernelsGpu, ReferenceModelsMatchReferencePath) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_reference_models(at::Device(at::kCUDA, 0));
}

TEST(ConvTPKernelsGpu, RandomIrrepsMatchReferencePath) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_random_layouts(at::Device(at::kCUDA, 0));
}

TEST(ConvTPSpecializedGpu, MatchesReferencePath) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  uint64_t seed = 5000;
  for (const NamedLayout& l : specializable_layouts())
    check_layout(l.in1, l.sh, l.layout, at::Device(at::kCUDA, 0), seed += 10, l.name, /*specialize=*/true);
}

TEST(ConvTPSpecializedGpu, RepeatedRunsAreBitwiseEqual) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  const NamedLayout l = specializable_layouts()[1];
  const ConvTPProblem p =
      testing::convert(testing::make_conv_tp_problem(l.in1, l.sh, l.layout, std::vector<int64_t>(50, 40), 60, 12),
                       at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  const Results a = run_kernels(p, true), b = run_kernels(p, true);
  EXPECT_TRUE(at::equal(a.agg, b.agg));
  EXPECT_TRUE(at::equal(a.dR, b.dR));
  EXPECT_TRUE(at::equal(a.dY, b.dY));
  EXPECT_TRUE(at::equal(a.dx, b.dx));
}

TEST(ConvTPKernelsGpu, RepeatedRunsAreBitwiseEqual) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  const Irreps in1 = Irreps::parse("64x0e+64x1o+64x2e"), sh = Irreps::spherical_harmonics(3);
  const ConvTPLayout layout = conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e+3o"));
  const ConvTPProblem p =
      testing::convert(testing::make_conv_tp_problem(in1, sh, layout, std::vector<int64_t>(50, 40), 3, 11),
                       at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  const Results a = run_kernels(p), b = run_kernels(p);
  EXPECT_TRUE(at::equal(a.agg, b.agg));
  EXPECT_TRUE(at::equal(a.dR, b.dR));
  EXPECT_TRUE(at::equal(a.dY, b.dY));
  EXPECT_TRUE(at::equal(a.dx, b.dx));
}

}  // namespace
}  // namespace flashmace
