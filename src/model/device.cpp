#include "model/device.h"

#include <ATen/ATen.h>
#include <sys/resource.h>

#include <fstream>

#ifdef FLASHMACE_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
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

void synchronize_device(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

void reset_peak_memory(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(device));
#else
  (void)device;
#endif
}

int64_t peak_memory_bytes(const std::string& device) {
#ifdef FLASHMACE_TORCH_CUDA
  if (is_cuda(device)) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
    return stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
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
