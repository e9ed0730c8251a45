// The CPU buffer cache (cpu_buffer_cache.h): a c10::Allocator installed as LibTorch's CPU allocator
// while a scope is alive; blocks it handed out return to it whenever they are freed, scope or not.
#include "engine/cpu_buffer_cache.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <unordered_map>

namespace flashmace {

namespace {

constexpr std::size_t kMinCached = std::size_t(1) << 20;
constexpr std::size_t kHugePage = std::size_t(2) << 20;

// A block of 2 MiB or more starts on a 2 MiB boundary and asks for transparent huge pages: the step
// reaches rows of its largest arrays (radial weights and their gradients, per edge pair) through
// indices, and with 4 KiB pages nearly every such row cost a page walk. Advice only: a kernel with them
// off ignores it. With huge pages, equal offsets in two blocks share their cache sets all the way up
// to L2 (4 KiB pages scatter them), and the conv TP backward reads row r of the radial weights while
// writing row r of their gradient: each hand-out of such a block starts at its own offset ("colour",
// kColours steps of a page and a cache line) into kColourSpan bytes of slack.
// Freed with c10::free_cpu (free()), as c10::alloc_cpu's blocks.
constexpr std::size_t kColourStep = 4096 + 64, kColours = 15, kColourSpan = kColourStep * kColours;
void* allocate_block(std::size_t size) {
  if (size < kHugePage) return c10::alloc_cpu(size);
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, size + kColourSpan) != 0 || !p) return c10::alloc_cpu(size + kColourSpan);
#if defined(MADV_HUGEPAGE)
  madvise(p, size + kColourSpan, MADV_HUGEPAGE);
#endif
  return p;
}

// Size classes: rounded up to a multiple of 1/8 of the request's highest power of two.
std::size_t size_class(std::size_t n) {
  std::size_t top = 1;
  while (top <= n / 2) top *= 2;
  const std::size_t step = top / 8;
  return (n + step - 1) / step * step;
}

class CachingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t n) override {
    if (n < kMinCached) return (previous ? previous : c10::GetDefaultCPUAllocator())->allocate(n);
    std::size_t size = size_class(n);
    void* p = take(&size);
    if (!p) p = allocate_block(size);
    std::size_t colour = 0;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (size >= kHugePage) colour = kColourStep * (colour_++ % kColours);
      live_[p] = size;
      live_bytes_ += size;
      peak_live_ = std::max(peak_live_, live_bytes_);
      window_peak_ = std::max(window_peak_, live_bytes_);
    }
    return {static_cast<char*>(p) + colour, p, &CachingCpuAllocator::release, c10::Device(c10::DeviceType::CPU)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  c10::Allocator* previous = nullptr;
  int depth = 0;
  std::mutex scope_mutex;

  CpuBufferCacheStats stats() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return {static_cast<int64_t>(cached_bytes_), static_cast<int64_t>(live_bytes_),
            static_cast<int64_t>(window_peak_), hits_, misses_};
  }
  void reset_peak() {
    const std::lock_guard<std::mutex> lock(mutex_);
    window_peak_ = live_bytes_;
  }
  void clear() {
    const std::lock_guard<std::mutex> lock(mutex_);
    trim(0);
  }

  static CachingCpuAllocator& instance();

 private:
  static void release(void* p) { instance().put(p); }

  // The smallest cached block of at least `size` bytes and at most a quarter more.
  void* take(std::size_t* size) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = free_.lower_bound(*size);
    if (it == free_.end() || it->first > *size + *size / 4) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    void* p = it->second;
    *size = it->first;
    order_.erase(std::find(order_.begin(), order_.end(), p));
    cached_bytes_ -= it->first;
    free_.erase(it);
    return p;
  }
  void put(void* p) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = live_.find(p);
    const std::size_t size = it->second;
    live_.erase(it);
    live_bytes_ -= size;
    free_.emplace(size, p);
    order_.push_back(p);
    cached_bytes_ += size;
    trim(2 * peak_live_);
  }
  // Frees the oldest cached blocks until at most `limit` bytes are cached.
  void trim(std::size_t limit) {
    while (cached_bytes_ > limit && !order_.empty()) {
      void* p = order_.front();
      order_.pop_front();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->second == p) {
          cached_bytes_ -= it->first;
          free_.erase(it);
          break;
        }
      c10::free_cpu(p);
    }
  }

  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;  // by size class
  std::list<void*> order_;                  // cached blocks, oldest first
  std::unordered_map<void*, std::size_t> live_;
  std::size_t cached_bytes_ = 0, live_bytes_ = 0, peak_live_ = 0, window_peak_ = 0;
  int64_t hits_ = 0, misses_ = 0;
  std::size_t colour_ = 0;
};

// Never destroyed: tensors from the cache may be freed at any time, also at exit.
CachingCpuAllocator& CachingCpuAllocator::instance() {
  static auto* a = new CachingCpuAllocator();
  return *a;
}

}  // namespace

CpuBufferCacheScope::CpuBufferCacheScope(bool active) : active_(active) {
  if (!active_) return;
  CachingCpuAllocator& a = CachingCpuAllocator::instance();
  const std::lock_guard<std::mutex> lock(a.scope_mutex);
  if (a.depth++ == 0) {
    a.previous = c10::GetCPUAllocator();
    c10::SetCPUAllocator(&a);
    // (a higher-priority allocator someone registered stays: then this scope changes nothing)
  }
}

CpuBufferCacheScope::~CpuBufferCacheScope() {
  if (!active_) return;
  CachingCpuAllocator& a = CachingCpuAllocator::instance();
  const std::lock_guard<std::mutex> lock(a.scope_mutex);
  if (--a.depth == 0 && c10::GetCPUAllocator() == &a) c10::SetCPUAllocator(a.previous);

}

CpuBufferCacheStats cpu_buffer_cache_stats() { return CachingCpuAllocator::instance().stats(); }

void reset_cpu_buffer_peak() { CachingCpuAllocator::instance().reset_peak(); }

void release_cpu_buffer_cache() { CachingCpuAllocator::instance().clear(); }

}  // namespace flashmace
