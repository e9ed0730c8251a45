#include "model/device.h"

#include <ATen/ATen.h>
#include <sys/resource.h>

#include <fstream>
#include <utility>

#include "core/error.h"

#ifdef FLASHMACE_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#endif

namespace flashmace {

namespace {

bool is_cuda(const std::string& device) { return device.rfind("cuda", 0) == 0; }

c10::DeviceIndex index_of(const std::string& device) {
  const at::Device d(device);
  return d.has_index() ? d.index() : 0;
}

}  // namespace

bool cuda_available() { return at::hasCUDA(); }

int cuda_device_count() { return at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0; }

std::string canonical_device(const std::string& name) {
  if (name == "cpu") return name;
  if (!is_cuda(name)) throw Error("Unknown device '" + name + "' (use cpu, cuda or cuda:N)");
  if (!at::hasCUDA())
    throw Error("Device '" + name + "' requested but this machine has no usable CUDA GPU; use device cpu");
  at::Device d(at::kCPU);
  try {
    d = at::Device(name);
  } catch (const c10::Error&) {
    throw Error("Unknown device '" + name + "' (use cpu, cuda or cuda:N)");
  }
  const int count = static_cast<int>(at::getNumGPUs());
#ifdef FLASHMACE_TORCH_CUDA
  const int index = d.has_index() ? d.index() : static_cast<int>(c10::cuda::current_device());
#else
  const int index = d.has_index() ? d.index() : 0;
#endif
  if (index < 0 || index >= count)
    throw Error("Device '" + name + "' does not exist: this machine shows " + std::to_string(count) +
                " CUDA device(s) (cuda:0 .. cuda:" + std::to_string(count - 1) + ")");
  return "cuda:" + std::to_string(index);
}

struct StreamScope::Impl {
#ifdef FLASHMACE_TORCH_CUDA
  explicit Impl(c10::cuda::CUDAStream stream) : guard(stream) {}
  c10::cuda::CUDAStreamGuard guard;
#endif
};

StreamScope::StreamScope(const std::string& device, void* cuda_stream) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device) && cuda_stream)
    impl_ = std::make_unique<Impl>(
        c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(cuda_stream), index_of(device)));
#else
  (void)device;
  (void)cuda_stream;
#endif
}

StreamScope::~StreamScope() = default;

void synchronize_stream(const std::string& device, void* cuda_stream) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device) && cuda_stream) {
    const cudaError_t status = cudaStreamSynchronize(static_cast<cudaStream_t>(cuda_stream));
    if (status != cudaSuccess) throw Error(std::string("CUDA stream synchronisation failed: ") + cudaGetErrorString(status));
    return;
  }
#endif
  synchronize_device(device);
}

void synchronize_device(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

void cuda_profiler(const std::string& device, bool collect) {
#ifdef FLASHMACE_TORCH_CUDA
  if (!is_cuda(device)) return;
  const cudaError_t err = collect ? cudaProfilerStart() : cudaProfilerStop();
  if (err != cudaSuccess) throw Error(std::string("cuda profiler: ") + cudaGetErrorString(err));
#else
  (void)device, (void)collect;
#endif
}

void reset_peak_memory(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(device));
#else
  (void)device;
#endif
}

void release_cached_memory(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) {
    synchronize_device(device);
    c10::cuda::CUDACachingAllocator::emptyCache();
  }
#else
  (void)device;
#endif
}

#ifdef FLASHMACE_TORCH_CUDA
namespace {
// The caching allocator's peaks on a CUDA device since the last reset: allocated and reserved bytes.
std::pair<int64_t, int64_t> allocator_peaks(const std::string& device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
  const auto agg = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return {stats.allocated_bytes[agg].peak, stats.reserved_bytes[agg].peak};
}
}  // namespace
#endif

int64_t peak_memory_bytes(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) return allocator_peaks(device).first;
#endif
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

int64_t peak_reserved_bytes(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) return allocator_peaks(device).second;
#else
  (void)device;
#endif
  return 0;
}

int64_t device_memory_in_use(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) {
    const c10::cuda::CUDAGuard guard(index_of(device));
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    return static_cast<int64_t>(total - free);
  }
#endif
  return peak_memory_bytes(device);  // (the process's peak resident set)
}

int64_t free_device_memory(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) {
    // The caching allocator's statistics need LibTorch's CUDA state, made lazily by the first CUDA
    // tensor; a budget asked for before any (ranks sharing a GPU, at model load) would find none.
    at::globalContext().lazyInitDevice(at::kCUDA);
    const c10::cuda::CUDAGuard guard(index_of(device));
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
    const auto agg = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return static_cast<int64_t>(free) + stats.reserved_bytes[agg].current - stats.allocated_bytes[agg].current;
  }
#endif
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

std::string device_name(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, index_of(device)) == cudaSuccess) return prop.name;
  }
#endif
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return device;
}

}  // namespace flashmace
