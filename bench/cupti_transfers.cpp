// Counts the bytes a process copies between host and device memory, as the GPU saw them: a CUDA
// injection library (the driver loads it at cuInit when CUDA_INJECTION64_PATH names it) that records
// CUPTI's memcpy activity and, at exit, writes one line per process:
//   htod_bytes=N htod_copies=N dtoh_bytes=N dtoh_copies=N dtod_bytes=N dtod_copies=N htoh_bytes=N ...
// to FLASHMACE_TRANSFERS_OUT.<pid> (or stderr without the variable). It sees every copy the driver
// performs (cudaMemcpy*, Kokkos deep_copy, LibTorch's .to()/.cpu(), statically linked runtimes too),
// not host pointers dereferenced from mapped memory. bench/kokkos_style.py --transfers uses it.
// Built by CMake where the CUDA toolkit has CUPTI (target cupti_transfers, lib/libcupti_transfers.so).
#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr int kKinds = 11;  // CUpti_ActivityMemcpyKind: UNKNOWN .. PTOP

std::atomic<uint64_t> bytes_by_kind[kKinds];
std::atomic<uint64_t> copies_by_kind[kKinds];

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_MEMCPY) continue;
    const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
    const int kind = copy->copyKind < kKinds ? copy->copyKind : 0;
    bytes_by_kind[kind] += copy->bytes;
    copies_by_kind[kind] += 1;
  }
  std::free(buffer);
}

void report() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  struct Named { const char* name; int kind; };
  const Named named[] = {{"htod", CUPTI_ACTIVITY_MEMCPY_KIND_HTOD}, {"dtoh", CUPTI_ACTIVITY_MEMCPY_KIND_DTOH},
                         {"dtod", CUPTI_ACTIVITY_MEMCPY_KIND_DTOD}, {"htoh", CUPTI_ACTIVITY_MEMCPY_KIND_HTOH},
                         {"ptop", CUPTI_ACTIVITY_MEMCPY_KIND_PTOP}, {"other", CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN}};
  std::string line;
  for (const Named& n : named) {
    line += std::string(line.empty() ? "" : " ") + n.name + "_bytes=" + std::to_string(bytes_by_kind[n.kind].load()) +
            " " + n.name + "_copies=" + std::to_string(copies_by_kind[n.kind].load());
  }
  const char* prefix = std::getenv("FLASHMACE_TRANSFERS_OUT");
  FILE* out = prefix ? std::fopen((std::string(prefix) + "." + std::to_string(getpid())).c_str(), "w") : stderr;
  if (!out) out = stderr;
  std::fprintf(out, "%s\n", line.c_str());
  if (out != stderr) std::fclose(out);
}

}  // namespace

// The driver's entry point for an injection library; once per process.
extern "C" int InitializeInjection() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "cupti_transfers: CUPTI refused the memcpy activity; nothing will be counted\n");
    return 0;
  }
  std::atexit(report);
  return 1;
}
