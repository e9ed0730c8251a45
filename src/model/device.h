#pragma once
// Device facts the benchmark needs, without LibTorch in the header: synchronisation and the
// caching allocator's peak (like torch.cuda.max_memory_allocated); host runs report peak RSS.
#include <cstdint>
#include <memory>
#include <string>

namespace flashmace {

bool cuda_available();
int cuda_device_count();  // 0 without a usable GPU
// "cpu", or "cuda:N" for "cuda" (LibTorch's current device) and "cuda:N"; throws a message naming
// the fix for unknown names, a machine without a GPU, or an index past the visible devices.
std::string canonical_device(const std::string& name);
void synchronize_device(const std::string& device);

// While it lives, LibTorch's current stream on a CUDA device is `cuda_stream` (a cudaStream_t made
// elsewhere, e.g. Kokkos's), so that work queued here is ordered with the owner's without
// synchronising the device. Nothing for "cpu" or a null stream.
class StreamScope {
 public:
  StreamScope(const std::string& device, void* cuda_stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// Waits for the work queued on `cuda_stream` (null: the whole device, synchronize_device).
void synchronize_stream(const std::string& device, void* cuda_stream);
// Starts (collect) or stops the CUDA profiler's collection (cudaProfilerStart / cudaProfilerStop):
// a profiler started with collection off (ncu --profile-from-start off) sees only what runs between.
// Nothing for "cpu".
void cuda_profiler(const std::string& device, bool collect);
void reset_peak_memory(const std::string& device);
// Returns the memory the allocator caches but nothing uses to the device (between measurements of
// different systems in one process).
void release_cached_memory(const std::string& device);
// Peak bytes allocated on a CUDA device since the last reset; for "cpu", the process's peak
// resident set size (which never resets).
int64_t peak_memory_bytes(const std::string& device);
// Peak bytes the caching allocator reserved on a CUDA device since the last reset: its blocks in use
// or cached, CUDA graphs' private pools included (memory a replayed graph uses without allocating);
// 0 for "cpu".
int64_t peak_reserved_bytes(const std::string& device);
// What a CUDA device has in use, by every allocation of every process on it (total minus free:
// LibTorch's cache, a Kokkos LAMMPS's own arrays and contexts included); for "cpu", the process's
// peak resident set size.
int64_t device_memory_in_use(const std::string& device);
std::string device_name(const std::string& device);
// Free bytes on a CUDA device (cudaMemGetInfo plus what LibTorch's cache holds but does not use);
// for "cpu", the available system memory.
int64_t free_device_memory(const std::string& device);

}  // namespace flashmace
