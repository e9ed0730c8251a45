#pragma once
// Device facts the benchmark needs, without LibTorch in the header: synchronisation and the
// caching allocator's peak (like torch.cuda.max_memory_allocated); host runs report peak RSS.
#include <cstdint>
#include <string>

namespace flashmace {

bool cuda_available();
void synchronize_device(const std::string& device);
void reset_peak_memory(const std::string& device);
// Peak bytes allocated on a CUDA device since the last reset; for "cpu", the process's peak
// resident set size (which never resets).
int64_t peak_memory_bytes(const std::string& device);
std::string device_name(const std::string& device);

}  // namespace flashmace
