#pragma once
// What flashmace copies between host and device memory, counted where each copy is queued: the
// pair styles' own copies, the fast engine's (the bucket status read per step, an uploaded box,
// inputs and outputs a caller keeps on the host) and its halo exchange's staging through host
// memory. A
// run reports from these the bytes an MD step moves. While a HostTransferScope lives, the copies
// counted on its thread add to its tally; with none alive, counting does nothing.
// Not counted: copies LibTorch operators make for themselves (the sizes an index build reads back,
// say). A step between neighbour-list builds makes none, so its count is complete there;
// bench/kokkos_style.py --transfers sets the count beside the driver's own (CUPTI) on a GPU.
#include <cstdint>

namespace flashmace {

struct HostTransfers {
  int64_t to_device_bytes = 0;
  int64_t to_host_bytes = 0;
  int64_t copies = 0;
  HostTransfers& operator+=(const HostTransfers& o) {
    to_device_bytes += o.to_device_bytes;
    to_host_bytes += o.to_host_bytes;
    copies += o.copies;
    return *this;
  }
};

class HostTransferScope {
 public:
  explicit HostTransferScope(HostTransfers* tally);  // (restores the enclosing scope's tally at its end)
  ~HostTransferScope();
  HostTransferScope(const HostTransferScope&) = delete;
  HostTransferScope& operator=(const HostTransferScope&) = delete;

 private:
  HostTransfers* enclosing_;
};

// One copy of `bytes` queued from host to device memory, or back. (Zero bytes: nothing is counted.)
void count_to_device(int64_t bytes);
void count_to_host(int64_t bytes);

}  // namespace flashmace
