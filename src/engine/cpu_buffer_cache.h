#pragma once
// Reuse of large CPU buffers between evaluations. A step on the CPU allocates its per-edge tensors
// (hundreds of MB) afresh each time; the C library maps every block above 32 MB from the kernel and
// returns it at free, so each step paid ~100k page faults and the zeroing of every page (~10 % of a
// step). While a CpuBufferCacheScope is alive, LibTorch's CPU allocations of 1 MiB and more come from
// a process-wide cache: a freed block is kept and handed out again for a request of its size class
// (sizes rounded up to 1/8 of their power of two), or of up to a quarter less. Blocks cached but
// unused are limited to 2x the largest amount ever in use at once (a step's blocks of different
// sizes take more than its peak: MACE-MH-1's 1.75x; with 1.25x the cache dropped blocks every step
// and faulted them in again, 14 % of its CPU step), oldest released first. Blocks of 2 MiB and more
// are on transparent huge pages where the kernel allows them (page walks for rows read through an
// index), each hand-out at its own small offset so that equal rows of two arrays do not share cache
// sets (cpu_buffer_cache.cpp). Smaller allocations are untouched.
// Torch-free header.
#include <cstdint>

namespace flashmace {

class CpuBufferCacheScope {
 public:
  // inactive: does nothing (a GPU evaluation)
  explicit CpuBufferCacheScope(bool active);
  ~CpuBufferCacheScope();
  CpuBufferCacheScope(const CpuBufferCacheScope&) = delete;
  CpuBufferCacheScope& operator=(const CpuBufferCacheScope&) = delete;

 private:
  bool active_;
};

struct CpuBufferCacheStats {
  int64_t cached_bytes = 0;  // freed, kept for reuse
  int64_t live_bytes = 0;    // handed out, not freed yet
  int64_t peak_live_bytes = 0;  // the most handed out at once since the last reset_cpu_buffer_peak()
  int64_t hits = 0, misses = 0;
};
CpuBufferCacheStats cpu_buffer_cache_stats();
// Starts a new peak_live_bytes from what is handed out now (the cache's own bound keeps the largest ever).
void reset_cpu_buffer_peak();
// Frees every cached block (kept blocks in use stay theirs).
void release_cpu_buffer_cache();

}  // namespace flashmace
