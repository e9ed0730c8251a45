// e3nn's irreps vocabulary and MACE's conv tensor-product layout (mace_spec.md 1 and 6).
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/irreps.h"

namespace flashmace {
namespace {

TEST(Irreps, ParseStrAndDim) {
  const Irreps ir = Irreps::parse("128x0e + 128x1o+2e");
  EXPECT_EQ(ir.str(), "128x0e+128x1o+1x2e");
  EXPECT_EQ(ir.dim(), 128 + 384 + 5);
  EXPECT_EQ(ir.offset(2), 512);
  EXPECT_EQ(ir.lmax(), 2);
  EXPECT_EQ(Irreps::spherical_harmonics(3).str(), "1x0e+1x1o+1x2e+1x3o");
  EXPECT_EQ(Irreps::parse("").size(), 0u);  // as in e3nn, the empty string is the empty irreps
  for (const char* bad : {"16x", "x0e", "16x1", "16x1q", "ax0e", "16x0e++1o"})
    EXPECT_THROW(Irreps::parse(bad), Error) << bad;
}

TEST(Irreps, SortIsStableByLThenOddBeforeEven) {
  EXPECT_EQ(Irreps::parse("1x1e+2x0e+3x1o+4x0o").sort().str(), "4x0o+2x0e+3x1o+1x1e");
  EXPECT_EQ(Irreps::parse("5x1o+2x0e+3x1o").sort().str(), "2x0e+5x1o+3x1o");  // ties keep their order
}

TEST(Irreps, SimplifyMergesOnlyAdjacentBlocks) {
  EXPECT_EQ(Irreps::parse("2x0e+3x0e+1x1o+4x0e").simplify().str(), "5x0e+1x1o+4x0e");
}

// Slot order and irreps of MACE's irreps_mid (mace_spec.md 6, verified against MACE's modules).
std::vector<std::string> slots(const ConvTPLayout& l, const Irreps& in) {
  std::vector<std::string> out;
  for (const auto& p : l.paths)
    out.push_back(l.mid[p.k].ir.str() + ":" + in[p.i1].ir.str() + "x" + std::to_string(p.i2));
  return out;
}

TEST(ConvTPLayout, MediumLayerOneMatchesMace) {
  const Irreps in = Irreps::parse("128x0e+128x1o"), sh = Irreps::spherical_harmonics(3);
  const Irreps target = (sh * 128).sort().simplify();
  const ConvTPLayout l = conv_tp_layout(in, sh, target);
  EXPECT_EQ(slots(l, in), (std::vector<std::string>{"0e:0ex0", "0e:1ox1", "1o:0ex1", "1o:1ox0", "1o:1ox2", "2e:0ex2",
                                                    "2e:1ox1", "2e:1ox3", "3o:0ex3", "3o:1ox2"}));
  EXPECT_EQ(l.weight_numel, 1280);
  EXPECT_EQ(l.mid.dim(), 5120);
}

TEST(ConvTPLayout, LargeLayerOneMatchesMace) {
  const Irreps in = Irreps::parse("128x0e+128x1o+128x2e"), sh = Irreps::spherical_harmonics(3);
  const ConvTPLayout l = conv_tp_layout(in, sh, (sh * 128).sort().simplify());
  EXPECT_EQ(slots(l, in), (std::vector<std::string>{"0e:0ex0", "0e:1ox1", "0e:2ex2", "1o:0ex1", "1o:1ox0", "1o:1ox2",
                                                    "1o:2ex1", "1o:2ex3", "2e:0ex2", "2e:1ox1", "2e:1ox3", "2e:2ex0",
                                                    "2e:2ex2", "3o:0ex3", "3o:1ox2", "3o:2ex1", "3o:2ex3"}));
  EXPECT_EQ(l.weight_numel, 2176);
  EXPECT_EQ(l.mid.dim(), 9088);
}

TEST(ConvTPLayout, LayerZeroHasOnePathPerOutput) {
  const Irreps in = Irreps::parse("128x0e"), sh = Irreps::spherical_harmonics(3);
  const ConvTPLayout l = conv_tp_layout(in, sh, (sh * 128).sort().simplify());
  EXPECT_EQ(l.paths.size(), 4u);
  EXPECT_EQ(l.weight_numel, 512);
  EXPECT_EQ(l.mid.dim(), 2048);
}

}  // namespace
}  // namespace flashmace
