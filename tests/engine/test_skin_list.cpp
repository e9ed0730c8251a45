// Positions mode with a neighbour list and its skin (GraphView::list_id; engine/step/skin_list.h):
// the fast engine, fed one list for several steps of moved atoms, equals the reference path on the
// edges within the cutoff at every step (float64: energy 1e-12 relative, forces, virial and
// per-atom virials 1e-10), and between list builds rebuilds no topology and no radial pairs; edges
// that outgrow the bucket are noticed and compacted anew; boxes shorter than twice the cutoff
// (many images of one atom, self-images) and triclinic cells; ghosts kept as rows with their
// exchange; chunked plans in blocks of rows, and their fallback. The CUDA cases (graph capture) are in
// tests/gpu/test_gpu_skin_list.cpp, on these same helpers.
#include "test_skin_list_support.h"

namespace flashmace {
namespace {

using testing::SkinCase;

TEST(SkinList, FoldedPeriodicListEqualsReferenceAndBuildsOnce) {
  testing::check_skin_steps(SkinCase{"small_l1", "cpu", "bulk"});
}

TEST(SkinList, ScalarModelWithoutRadialPairs) {
  SkinCase c{"scalar_l0", "cpu", "bulk"};
  c.radial_pairs = "off";
  testing::check_skin_steps(c);
}

TEST(SkinList, LargeModelTriclinicSmallBox) {
  SkinCase c{"large_l2", "cpu", "small_triclinic"};
  testing::check_skin_steps(c);
}

TEST(SkinList, CompressionOverflowsTheBucketAndIsCompactedAnew) { testing::check_overflow(SkinCase{"small_l1", "cpu", "bulk"}); }

TEST(SkinList, GhostRowsKeepTheirExchange) { testing::check_ghost_rows(SkinCase{"small_l1", "cpu", "bulk"}); }

TEST(SkinList, ChunkedPlanCompactsEveryBlockOncePerList) {
  // Chunks of 200 edges: blocks of a few receiver rows, each compacted into its own chunk with its
  // own padding and pairs, one topology per list.
  SkinCase c{"small_l1", "cpu", "bulk"};
  c.edge_chunk = 200;
  c.expect_blocks = true;
  testing::check_skin_steps(c);
}

TEST(SkinList, NodeBlocksOfFiveRowsCompactEveryBlock) {
  SkinCase c{"large_l2", "cpu", "bulk"};
  c.atom_chunk = 5;
  c.expect_blocks = true;
  testing::check_skin_steps(c);
}

TEST(SkinList, ChunkedScalarModelWithoutRadialPairs) {
  SkinCase c{"scalar_l0", "cpu", "bulk"};
  c.radial_pairs = "off";
  c.edge_chunk = 200;
  c.expect_blocks = true;
  testing::check_skin_steps(c);
}

TEST(SkinList, ChunkedPlanNoticesABlockOutgrowingItsBucket) {
  // (blocks of ~400 edges have up to 17 % headroom: 4 and 8 % strains put 12 and 24 % more pairs
  // within the cutoff)
  SkinCase c{"small_l1", "cpu", "bulk"};
  c.edge_chunk = 400;
  c.expect_blocks = true;
  testing::check_overflow(c, 0.04);
}

TEST(SkinList, ChunkedPlanWithGhostRows) {
  SkinCase c{"small_l1", "cpu", "bulk"};
  c.edge_chunk = 400;
  c.expect_blocks = true;
  testing::check_ghost_rows(c);
}

TEST(SkinList, ChunkSmallerThanOneRowTakesTheVectorsPath) {
  SkinCase c{"small_l1", "cpu", "bulk"};
  c.edge_chunk = 16;
  c.expect_compaction = false;
  testing::check_skin_steps(c);
}

TEST(SkinList, OverlappingAtomsAreNamed) { testing::check_too_close(SkinCase{"small_l1", "cpu", "bulk"}); }

}  // namespace
}  // namespace flashmace
