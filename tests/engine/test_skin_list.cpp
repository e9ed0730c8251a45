// Positions mode with a neighbour list and its skin (GraphView::list_id; engine/step/skin_list.h):
// the fast engine, fed one list for several steps of moved atoms, equals the reference path on the
// edges within the cutoff at every step (float64: energy 1e-12 relative, forces, virial and
// per-atom virials 1e-10), and between list builds rebuilds no topology and no radial pairs; edges
// that outgrow the bucket are noticed and compacted anew (the bucket's headroom then grows); boxes
// shorter than twice the cutoff (many images of one atom, self-images) and triclinic cells; ghosts
// kept as rows with their exchange; chunked plans in blocks of rows, and their fallback. The CUDA
// cases (graph capture) are in tests/gpu/test_gpu_skin_list.cpp, on these same helpers.
#include "engine/step/skin_list.h"
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

// The bucket's headroom: count / 128 (plus 64, on a granule of 256 here) at first, doubled by each
// overflow up to count / 16; a previous bucket is kept while it holds half the headroom and wastes
// at most four times it.
TEST(SkinBucket, HeadroomStartsNearOnePercentAndGrowsWithOverflows) {
  const int64_t count = 100000;
  std::vector<int64_t> bucket;
  for (int headroom = 0; headroom <= 4; ++headroom) bucket.push_back(skin_bucket(count, 0, headroom));
  for (int headroom = 0; headroom <= 3; ++headroom) {
    const int64_t h = count >> (7 - headroom);
    EXPECT_GE(bucket[headroom], count + h + 64) << headroom;
    EXPECT_LT(bucket[headroom], count + h + 64 + 256) << headroom;
    EXPECT_EQ(bucket[headroom] % 256, 0) << headroom;
  }
  EXPECT_LT(bucket[0], count + count / 100);  // (below the 3 % a fixed headroom used to take)
  EXPECT_EQ(bucket[4], bucket[3]);            // (at most count / 16)
  // Hysteresis at headroom 0 (h = 781): kept from count + 390 + 32 to count + 4 h + 1024.
  EXPECT_EQ(skin_bucket(count, count + 422), count + 422);
  EXPECT_EQ(skin_bucket(count, count + 4 * 781 + 1024), count + 4 * 781 + 1024);
  EXPECT_EQ(skin_bucket(count, count + 421), bucket[0]);
  EXPECT_EQ(skin_bucket(count, count + 4 * 781 + 1025), bucket[0]);
}

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
