// e3nn's irreps vocabulary (mace_spec.md 1) and MACE's conv tensor-product layout
// (tp_out_irreps_with_instructions, mace_spec.md 6). Everything here is integer bookkeeping, so
// every comparison is exact.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/irreps.h"

namespace flashmace {
namespace {

TEST(Irreps, CanonicalStringsRoundTripThroughParse) {
  for (const char* s : {"1x0e", "128x0e+128x1o", "16x0e+16x1o+16x2e+16x3o", "3x2o+1x0e+7x1e", "0x1o", "1x10e"})
    EXPECT_EQ(Irreps::parse(s).str(), s);
}

TEST(Irreps, ParseAcceptsE3nnShorthands) {
  // Multiplicity 1 may be omitted and blanks around '+' are ignored, as in e3nn.
  EXPECT_EQ(Irreps::parse("128x0e + 128x1o+2e").str(), "128x0e+128x1o+1x2e");
  EXPECT_EQ(Irreps::parse(" 0e ").str(), "1x0e");
  EXPECT_EQ(Irreps::parse("").size(), 0u);  // e3nn: Irreps("") is the empty irreps
  const Irreps odd = Irreps::parse("5x3o");
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_EQ(odd[0].mul, 5);
  EXPECT_EQ(odd[0].ir.l, 3);
  EXPECT_EQ(odd[0].ir.p, -1);
}

TEST(Irreps, DimOffsetAndLmaxFollowTheMulIrLayout) {
  const Irreps ir = Irreps::parse("128x0e+128x1o+1x2e");
  EXPECT_EQ(ir.dim(), 128 * 1 + 128 * 3 + 1 * 5);
  EXPECT_EQ(ir.offset(0), 0);
  EXPECT_EQ(ir.offset(1), 128);
  EXPECT_EQ(ir.offset(2), 512);
  EXPECT_EQ(ir.offset(3), ir.dim());
  EXPECT_EQ(ir.lmax(), 2);
  EXPECT_TRUE(ir.contains(Irrep{1, -1}));
  EXPECT_FALSE(ir.contains(Irrep{1, 1}));
  EXPECT_EQ(Irreps().dim(), 0);
  EXPECT_EQ(Irreps::spherical_harmonics(3).dim(), 16);
}

TEST(Irreps, NamedConstructorsAndScaling) {
  EXPECT_EQ(Irreps::spherical_harmonics(0).str(), "1x0e");
  EXPECT_EQ(Irreps::spherical_harmonics(3).str(), "1x0e+1x1o+1x2e+1x3o");  // natural parity (-1)^l
  EXPECT_EQ(Irreps::scalars(24).str(), "24x0e");
  EXPECT_EQ((Irreps::parse("2x0e+1x1o") * 8).str(), "16x0e+8x1o");
}

TEST(Irreps, MalformedStringsThrow) {
  for (const char* bad :
       {"16x", "x0e", "16x1", "16x1q", "ax0e", "16x0e++1o", "+1x0e", "-1x0e", "1x-1e", "1.5x0e", "e", "16x0e 1o"})
    EXPECT_THROW(Irreps::parse(bad), Error) << "'" << bad << "'";
}

// e3nn's Irreps("16x0e+") fails on the empty item after the '+'; a dangling '+' is a typo that must
// not silently drop a block.
TEST(Irreps, TrailingPlusIsRejectedLikeE3nn) { EXPECT_THROW(Irreps::parse("16x0e+"), Error); }

TEST(Irreps, SortIsStableByLThenOddBeforeEven) {
  EXPECT_EQ(Irreps::parse("1x1e+2x0e+3x1o+4x0o").sort().str(), "4x0o+2x0e+3x1o+1x1e");
  EXPECT_EQ(Irreps::parse("5x1o+2x0e+3x1o").sort().str(), "2x0e+5x1o+3x1o");  // equal irreps keep their order
  EXPECT_EQ(Irreps::parse("1x3o+1x2e+1x1o+1x0e").sort().str(), "1x0e+1x1o+1x2e+1x3o");
}

TEST(Irreps, SimplifyMergesOnlyAdjacentBlocks) {
  EXPECT_EQ(Irreps::parse("2x0e+3x0e+1x1o+4x0e").simplify().str(), "5x0e+1x1o+4x0e");
  EXPECT_EQ(Irreps::parse("1x0e+1x0o+1x0e").simplify().str(), "1x0e+1x0o+1x0e");  // parity differs
  // MACE's hidden irreps / interaction target: (C * sh).sort().simplify() (mace_spec.md 1).
  EXPECT_EQ((Irreps::spherical_harmonics(3) * 128).sort().simplify().str(), "128x0e+128x1o+128x2e+128x3o");
  EXPECT_EQ(Irreps::parse("1x1o+2x0e+3x1o").sort().simplify().str(), "2x0e+4x1o");
}

// "out:in1 x sh-index" per slot, slot s using radial weights [C*s, C*(s+1)).
std::vector<std::string> slots(const ConvTPLayout& l, const Irreps& in) {
  std::vector<std::string> out;
  for (const auto& p : l.paths)
    out.push_back(l.mid[p.k].ir.str() + ":" + in[p.i1].ir.str() + "x" + std::to_string(p.i2));
  return out;
}

// MACE builds one mid block per path, so after sorting slot s is mid block s.
void expect_one_mid_block_per_path(const ConvTPLayout& l, const Irreps& in) {
  ASSERT_EQ(l.paths.size(), l.mid.size());
  for (std::size_t s = 0; s < l.paths.size(); ++s) {
    EXPECT_EQ(l.paths[s].k, static_cast<int>(s));
    EXPECT_EQ(l.mid[s].mul, in[l.paths[s].i1].mul);
  }
}

const Irreps kSh3 = Irreps::spherical_harmonics(3);
const Irreps kTarget128 = (kSh3 * 128).sort().simplify();

TEST(ConvTPLayout, MediumLayerOneReproducesTheSpecTable) {
  const Irreps in = Irreps::parse("128x0e+128x1o");
  const ConvTPLayout l = conv_tp_layout(in, kSh3, kTarget128);
  // mace_spec.md 6, "Layer 1, medium": slots 0..9.
  EXPECT_EQ(slots(l, in), (std::vector<std::string>{"0e:0ex0", "0e:1ox1", "1o:0ex1", "1o:1ox0", "1o:1ox2", "2e:0ex2",
                                                    "2e:1ox1", "2e:1ox3", "3o:0ex3", "3o:1ox2"}));
  EXPECT_EQ(l.mid.str(), "128x0e+128x0e+128x1o+128x1o+128x1o+128x2e+128x2e+128x2e+128x3o+128x3o");
  expect_one_mid_block_per_path(l, in);
  EXPECT_EQ(l.weight_numel, 1280);
  EXPECT_EQ(l.mid.dim(), 5120);
}

TEST(ConvTPLayout, LargeLayerOneReproducesTheSpecSlotOrder) {
  const Irreps in = Irreps::parse("128x0e+128x1o+128x2e");
  const ConvTPLayout l = conv_tp_layout(in, kSh3, kTarget128);
  // mace_spec.md 6, "Layer 1, large": (in1 index, sh index) per slot, grouped by output irrep.
  EXPECT_EQ(slots(l, in), (std::vector<std::string>{"0e:0ex0", "0e:1ox1", "0e:2ex2", "1o:0ex1", "1o:1ox0", "1o:1ox2",
                                                    "1o:2ex1", "1o:2ex3", "2e:0ex2", "2e:1ox1", "2e:1ox3", "2e:2ex0",
                                                    "2e:2ex2", "3o:0ex3", "3o:1ox2", "3o:2ex1", "3o:2ex3"}));
  expect_one_mid_block_per_path(l, in);
  EXPECT_EQ(l.weight_numel, 2176);
  EXPECT_EQ(l.mid.dim(), 9088);
}

TEST(ConvTPLayout, LayerZeroHasOnePathPerSphericalHarmonic) {
  const Irreps in = Irreps::parse("128x0e");
  const ConvTPLayout l = conv_tp_layout(in, kSh3, kTarget128);
  EXPECT_EQ(slots(l, in), (std::vector<std::string>{"0e:0ex0", "1o:0ex1", "2e:0ex2", "3o:0ex3"}));
  EXPECT_EQ(l.mid.str(), "128x0e+128x1o+128x2e+128x3o");
  EXPECT_EQ(l.weight_numel, 512);
  EXPECT_EQ(l.mid.dim(), 2048);
}

TEST(ConvTPLayout, PathsOutsideTheTargetAreDroppedAndTheRestSorted) {
  // 1o x (0e+1o) = 1o + (0e+1e+2e); a target without 1e and 2e keeps 1o(x0e) and 0e(x1o), 0e first.
  const Irreps in = Irreps::parse("4x1o");
  const ConvTPLayout l = conv_tp_layout(in, Irreps::spherical_harmonics(1), Irreps::parse("4x0e+4x1o"));
  EXPECT_EQ(slots(l, in), (std::vector<std::string>{"0e:1ox1", "1o:1ox0"}));
  EXPECT_EQ(l.weight_numel, 8);
}

TEST(IrMulLayout, RunsOfOneIrrepShareTheirComponents) {
  // 2x0e+1x1o+2x1o+1x2e: the two 1o blocks form one run of 3 channels (columns 2..10).
  const Irreps irreps = Irreps::parse("2x0e+1x1o+2x1o+1x2e");
  const IrMulPlace second = ir_mul_place(irreps, 2);
  EXPECT_EQ(second.run_offset, 2);
  EXPECT_EQ(second.run_mul, 3);
  EXPECT_EQ(second.channel_offset, 1);
  EXPECT_EQ(ir_mul_place(irreps, 1).channel_offset, 0);
  // mul_ir columns: 0e u0, u1 | 1o(run channel 0) m0..2 | 1o channels 1, 2: m0..2 each | 2e m0..4.
  // ir_mul: run column 2 + m * 3 + channel.
  EXPECT_EQ(ir_mul_columns(irreps),
            (std::vector<int>{0, 1, 2, 5, 8, 3, 6, 9, 4, 7, 10, 11, 12, 13, 14, 15}));
  // Blocks of one irrep that are not adjacent stay apart; scalars keep their columns.
  EXPECT_EQ(ir_mul_columns(Irreps::parse("1x1o+1x0e+1x1o")), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ir_mul_columns(Irreps::parse("2x1o")), (std::vector<int>{0, 2, 4, 1, 3, 5}));
  // Only a run of several l > 0 blocks interleaves a block's channels with another block's.
  EXPECT_TRUE(ir_mul_runs_span_blocks(irreps));
  EXPECT_FALSE(ir_mul_runs_span_blocks(Irreps::parse("1x1o+1x0e+1x1o")));
  EXPECT_FALSE(ir_mul_runs_span_blocks(Irreps::parse("2x0e+3x0e+4x1o")));
}

}  // namespace
}  // namespace flashmace
