// The fused conv TP kernels (engine/kernels/conv_tp_kernels.h through engine/ops/conv_tp_op.h) on
// the CPU equal the reference path: conv_tensor_product on gathered features, index_add over
// receivers, and autograd for dR, dY, dx; for the shared reference models' layers and random irreps
// up to l = 3, receiver segments with empty rows, single edges and many edges, x indexed by sender
// and by species, radial rows shared through an index; float32 within float32 round-off of float64
// (the checks: engine/test_conv_tp_support.h). Also the kernel descriptor, and the code generator's
// layouts compiled by NVRTC. The same on a CUDA GPU: gpu/test_gpu_conv_tp.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/kernels/conv_tp_codegen.h"
#include "core/cpu_isa.h"
#include "engine/ops/conv_tp_op.h"
#include "cpu_isa_support.h"
#include "engine/test_conv_tp_support.h"
#include "jit/nvrtc.h"
#include "test_support.h"

namespace flashmace {
namespace {

using testing::check_radial_index;
using testing::check_random_layouts;
using testing::check_reference_models;
using testing::ConvTPProblem;
using testing::NamedLayout;
using testing::specializable_layouts;

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
  int grouped = 0;
  for (const NamedLayout& l : specializable_layouts()) {
    std::string mul_ir_src;
    for (const bool ir_mul : {false, true}) {
      const ConvTPDescriptor d = ConvTPDescriptor::build(l.in1, l.sh, l.layout, ir_mul);
      ASSERT_EQ(conv_tp_specialization_unsupported(d), "") << l.name;
      const std::string src = generate_conv_tp_cuda_source(d);
      EXPECT_EQ(src, generate_conv_tp_cuda_source(d)) << "not deterministic: " << l.name;
      // The forward's thread groups share the paths out: each output component is summed by one group.
      grouped += conv_tp_forward_groups(d) > 1;
      for (std::size_t P = 0; P < d.paths.size(); ++P)
        for (int m = 0; m < d.paths[P].d3; ++m) {
          const std::string sum = "double a" + std::to_string(P) + "_" + std::to_string(m) + " = 0.0;";
          const std::size_t first = src.find(sum);
          EXPECT_TRUE(first != std::string::npos && src.find(sum, first + 1) == std::string::npos)
              << l.name << ": path " << P << " component " << m << " is not summed exactly once";
        }
      if (ir_mul) {
        EXPECT_NE(src, mul_ir_src) << "the layouts share a source (and a cache entry): " << l.name;
      }
      mul_ir_src = src;
      const Cubin c = compile_cubin(src, "sm_90", JitUse{"the conv TP kernels", "the test fails"});
      EXPECT_TRUE(c) << l.name << (ir_mul ? " ir_mul" : "") << ": " << c.error;
    }
  }
  EXPECT_GT(grouped, 0) << "no layout here has a forward kernel in several thread groups";
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

TEST(ConvTPKernelsCpu, ThreadCountsMatchReferencePathAndRepeatBitwise) { testing::check_thread_counts(); }

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

// The ir_mul layout is the generated CUDA kernels' alone: the table-driven kernels refuse it.
TEST(ConvTPKernelsCpu, IrMulDescriptorNeedsTheGeneratedKernels) {
  const NamedLayout l = specializable_layouts()[1];
  const ConvTPOp op(ConvTPDescriptor::build(l.in1, l.sh, l.layout, /*ir_mul=*/true), at::TensorOptions().dtype(at::kDouble));
  const testing::ConvTPProblem p = testing::make_conv_tp_problem(l.in1, l.sh, l.layout, {2, 1}, 4, 3);
  try {
    conv_tp_aggregate(op, p.x, p.xindex, p.Y, p.R, p.row_ptr, p.nrows);
    ADD_FAILURE() << "the CPU kernels ran an ir_mul descriptor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("specialised CUDA kernels"), std::string::npos) << e.what();
  }
  EXPECT_THROW(conv_tp_aggregate_backward(op, p.dagg, p.x, p.xindex, p.Y, p.R, p.row_ptr), Error);
}

TEST(ConvTPKernelsCpu, RadialIndexEqualsExpandedRadialsBitwise) { check_radial_index(at::kCPU, false); }

// The row kernels of every instruction set this processor runs: layouts whose multiplicities fill
// vector tiles (32, 64), leave a tail after them (40), take every size of tile (120 = 64 + 32 + 16 +
// 8 channels; 136 = 128 + 8 in float32 with 8 AVX-512 vectors a tile) and are smaller than one
// (random, 1-6).
TEST(ConvTPKernelsCpu, EveryInstructionSetMatchesReferencePath) {
  testing::for_each_cpu_isa([](CpuIsa isa) {
    const ConvTPOp probe(ConvTPDescriptor::build(Irreps::parse("1x0e"), Irreps::spherical_harmonics(0),
                                                 conv_tp_layout(Irreps::parse("1x0e"), Irreps::spherical_harmonics(0),
                                                                Irreps::parse("0e"))),
                         at::TensorOptions().dtype(at::kDouble));
    EXPECT_EQ(probe.executor(), std::string("cpu ") + cpu_isa_name(isa));
    for (const NamedLayout& l : specializable_layouts())
      testing::check_layout(l.in1, l.sh, l.layout, at::kCPU, 7, l.name);
    const Irreps in1 = Irreps::parse("40x0e+40x1o"), sh = Irreps::spherical_harmonics(3);
    testing::check_layout(in1, sh, conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e+3o")), at::kCPU, 8,
                          "40x0e+40x1o x sh3");
    const Irreps wide = Irreps::parse("120x0e+120x1o"), sh2 = Irreps::spherical_harmonics(2);
    testing::check_layout(wide, sh2, conv_tp_layout(wide, sh2, Irreps::parse("0e+1o+2e")), at::kCPU, 9,
                          "120x0e+120x1o x sh2");
    const Irreps wider = Irreps::parse("136x0e");
    testing::check_layout(wider, sh, conv_tp_layout(wider, sh, Irreps::parse("0e+1o+2e+3o")), at::kCPU, 10,
                          "136x0e x sh3");
    // l = 4 inputs, outputs and harmonics: path shapes past the kernels' compiled ones (d > 7)
    const Irreps high = Irreps::parse("20x0e+20x4e"), sh4 = Irreps::spherical_harmonics(4);
    testing::check_layout(high, sh4, conv_tp_layout(high, sh4, Irreps::parse("0e+1o+2e+3o+4e+5o")), at::kCPU, 11,
                          "20x0e+20x4e x sh4");
    check_random_layouts(at::kCPU);
    check_radial_index(at::kCPU, false);
  });
}

TEST(CpuIsa, DispatcherPicksTheBestSupportedAndRefusesTheRest) {
  EXPECT_TRUE(cpu_isa_supported(CpuIsa::portable));
  const CpuIsa best = best_cpu_isa();
  EXPECT_TRUE(cpu_isa_supported(best));
  for (const CpuIsa isa : {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512}) {
    EXPECT_EQ(parse_cpu_isa(cpu_isa_name(isa)), isa);
    // the best is the widest the processor runs
    if (cpu_isa_supported(isa)) {
      EXPECT_GE(static_cast<int>(best), static_cast<int>(isa));
    }
  }
#if defined(__x86_64__)
  EXPECT_TRUE(cpu_isa_compiled(CpuIsa::avx2) && cpu_isa_compiled(CpuIsa::avx512));
  EXPECT_TRUE(cpu_isa_supported(CpuIsa::avx2) || best == CpuIsa::portable);
#endif
  EXPECT_NE(testing::error_of([] { parse_cpu_isa("sse9"); }).find("use portable, avx2 or avx512"), std::string::npos);
  const CpuIsa chosen = cpu_isa();
  for (const CpuIsa isa : {CpuIsa::avx2, CpuIsa::avx512})
    if (!cpu_isa_supported(isa)) {
      EXPECT_NE(testing::error_of([&] { set_cpu_isa(isa); }).find(cpu_isa_name(isa)), std::string::npos);
    }
  set_cpu_isa(chosen);
}

}  // namespace
}  // namespace flashmace
