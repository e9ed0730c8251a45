// The skin-list cases of tests/engine/test_skin_list.cpp on CUDA, where the compaction and the step
// are captured CUDA graphs: one capture of the step per list, replays on the steps after it.
#include "engine/test_skin_list_support.h"

namespace flashmace {
namespace {

using testing::SkinCase;

class GpuSkinList : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  }
};

TEST_F(GpuSkinList, FoldedPeriodicListEqualsReferenceAndCapturesOnce) {
  testing::check_skin_steps(SkinCase{"small_l1", "cuda", "bulk"});
}

TEST_F(GpuSkinList, LargeModelTriclinicSmallBox) { testing::check_skin_steps(SkinCase{"large_l2", "cuda", "small_triclinic"}); }

TEST_F(GpuSkinList, CompressionOverflowsTheBucketAndIsCompactedAnew) {
  testing::check_overflow(SkinCase{"small_l1", "cuda", "bulk"});
}

TEST_F(GpuSkinList, GhostRowsKeepTheirExchange) { testing::check_ghost_rows(SkinCase{"small_l1", "cuda", "bulk"}); }

TEST_F(GpuSkinList, ChunkedPlanCompactsEveryBlockWithoutCapture) {
  SkinCase c{"small_l1", "cuda", "bulk"};
  c.edge_chunk = 200;
  c.expect_blocks = true;
  testing::check_skin_steps(c);
}

TEST_F(GpuSkinList, ChunkedPlanNoticesABlockOutgrowingItsBucket) {
  SkinCase c{"small_l1", "cuda", "bulk"};
  c.edge_chunk = 400;
  c.expect_blocks = true;
  testing::check_overflow(c, 0.04);
}

TEST_F(GpuSkinList, OverlappingAtomsAreNamed) { testing::check_too_close(SkinCase{"small_l1", "cuda", "bulk"}); }

}  // namespace
}  // namespace flashmace
