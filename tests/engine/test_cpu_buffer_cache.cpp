// The CPU buffer cache (engine/cpu_buffer_cache.h): inside a scope, a freed large block is handed out
// again (same memory, no fresh pages), small blocks and allocations outside a scope bypass it, and
// the cached bytes stay bounded and can be released; blocks of 2 MiB and more start on 2 MiB
// boundaries, each hand-out at its own offset (colour) inside the block. The engine's numbers with the
// cache are checked by every CPU equivalence test (the evaluators run inside a scope).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdint>

#include "engine/cpu_buffer_cache.h"

namespace flashmace {
namespace {

constexpr int64_t kLarge = 3 << 20;  // floats: 12 MiB

TEST(CpuBufferCache, ReusesAFreedLargeBlockInsideAScope) {
  release_cpu_buffer_cache();
  const CpuBufferCacheStats before = cpu_buffer_cache_stats();
  void* first = nullptr;
  {
    const CpuBufferCacheScope scope(true);
    {
      const at::Tensor a = at::empty({kLarge}, at::kFloat);
      first = a.storage().data_ptr().get_context();  // the block (its data starts at a colour offset)
      EXPECT_EQ(cpu_buffer_cache_stats().live_bytes - before.live_bytes, kLarge * 4);
    }
    EXPECT_GE(cpu_buffer_cache_stats().cached_bytes, kLarge * 4);
    // a request up to a quarter smaller takes the same block
    const at::Tensor b = at::empty({kLarge - kLarge / 8}, at::kFloat);
    EXPECT_EQ(b.storage().data_ptr().get_context(), first);
    b.fill_(2.0f);
    EXPECT_EQ(b.sum().item<double>(), 2.0 * static_cast<double>(b.numel()));
    EXPECT_EQ(cpu_buffer_cache_stats().hits, before.hits + 1);
    // small blocks bypass it
    const at::Tensor small = at::empty({1000}, at::kFloat);
    EXPECT_EQ(cpu_buffer_cache_stats().hits + cpu_buffer_cache_stats().misses, before.hits + before.misses + 2);
  }
  // outside a scope, LibTorch's own allocator serves
  const CpuBufferCacheStats after = cpu_buffer_cache_stats();
  const at::Tensor c = at::empty({kLarge}, at::kFloat);
  EXPECT_EQ(cpu_buffer_cache_stats().hits + cpu_buffer_cache_stats().misses, after.hits + after.misses);
  EXPECT_EQ(cpu_buffer_cache_stats().live_bytes, before.live_bytes);
  release_cpu_buffer_cache();
  EXPECT_EQ(cpu_buffer_cache_stats().cached_bytes, 0);
}

// Large blocks on 2 MiB boundaries (huge pages); consecutive hand-outs of one block at different
// offsets, all of a tensor's bytes inside the block (written in full: the ASan build checks).
TEST(CpuBufferCache, LargeBlocksAreAlignedAndHandedOutAtDifferentOffsets) {
  release_cpu_buffer_cache();
  const CpuBufferCacheScope scope(true);
  const auto offset = [](const at::Tensor& t) {
    const auto block = reinterpret_cast<std::uintptr_t>(t.storage().data_ptr().get_context());
    EXPECT_EQ(block % (std::uintptr_t(2) << 20), 0u);
    return reinterpret_cast<std::uintptr_t>(t.data_ptr()) - block;
  };
  std::uintptr_t previous = 0;
  const void* block = nullptr;
  for (int i = 0; i < 3; ++i) {
    const at::Tensor t = at::empty({kLarge}, at::kFloat);
    t.fill_(static_cast<float>(i));
    EXPECT_EQ(t.sum().item<double>(), static_cast<double>(i) * kLarge);
    if (i > 0) {
      EXPECT_EQ(t.storage().data_ptr().get_context(), block);  // the same block again
      EXPECT_NE(offset(t), previous);
    }
    block = t.storage().data_ptr().get_context();
    previous = offset(t);
  }
  release_cpu_buffer_cache();
}

// The peak of the bytes handed out, as flashmace-bench's breakdown reads it per stage: the most live
// at once since the last reset, which starts the next window from what is live then.
TEST(CpuBufferCache, PeakLiveBytesSinceTheLastReset) {
  const CpuBufferCacheScope scope(true);
  const int64_t base = cpu_buffer_cache_stats().live_bytes;
  reset_cpu_buffer_peak();
  EXPECT_EQ(cpu_buffer_cache_stats().peak_live_bytes, base);
  const at::Tensor kept = at::empty({kLarge}, at::kFloat);
  { const at::Tensor transient = at::empty({2 * kLarge}, at::kFloat); }
  EXPECT_EQ(cpu_buffer_cache_stats().peak_live_bytes, base + 3 * kLarge * 4);
  reset_cpu_buffer_peak();
  EXPECT_EQ(cpu_buffer_cache_stats().peak_live_bytes, base + kLarge * 4);
}

// A step's blocks of different sizes: one large block, then two smaller ones of another size class
// (the pattern of NonLinear layers' per-edge tensors). Together they are 1.75x the most that is live
// at once; the cache keeps them all, so from the second step on every request is a hit (no fresh
// pages). A bound of 1.25x the live peak evicted one each step and faulted it in again.
TEST(CpuBufferCache, AStepOfMixedSizesHitsFromItsSecondRepetition) {
  release_cpu_buffer_cache();
  constexpr int64_t kBig = 16 << 20, kSmall = 6 << 20;  // floats: 64 and 24 MiB
  const CpuBufferCacheScope scope(true);
  const auto step = [] {
    at::empty({kBig}, at::kFloat).fill_(1.0f);
    const at::Tensor a = at::empty({kSmall}, at::kFloat), b = at::empty({kSmall}, at::kFloat);
    a.fill_(1.0f);
    b.fill_(1.0f);
  };
  step();
  const CpuBufferCacheStats first = cpu_buffer_cache_stats();
  for (int i = 0; i < 3; ++i) step();
  const CpuBufferCacheStats later = cpu_buffer_cache_stats();
  EXPECT_EQ(later.misses, first.misses);
  EXPECT_EQ(later.hits, first.hits + 9);
  EXPECT_EQ(later.cached_bytes, (kBig + 2 * kSmall) * 4);
  release_cpu_buffer_cache();
}

TEST(CpuBufferCache, InactiveScopeAndNestedScopesLeaveTheAllocatorAsFound) {
  const CpuBufferCacheStats before = cpu_buffer_cache_stats();
  {
    const CpuBufferCacheScope off(false);
    const at::Tensor a = at::empty({kLarge}, at::kFloat);
  }
  EXPECT_EQ(cpu_buffer_cache_stats().misses, before.misses);
  {
    const CpuBufferCacheScope outer(true);
    {
      const CpuBufferCacheScope inner(true);
    }
    const at::Tensor a = at::empty({kLarge}, at::kFloat);  // still the cache's
  }
  EXPECT_EQ(cpu_buffer_cache_stats().hits + cpu_buffer_cache_stats().misses, before.hits + before.misses + 1);
  const at::Tensor b = at::empty({kLarge}, at::kFloat);
  EXPECT_EQ(cpu_buffer_cache_stats().hits + cpu_buffer_cache_stats().misses, before.hits + before.misses + 1);
  release_cpu_buffer_cache();
}

}  // namespace
}  // namespace flashmace
