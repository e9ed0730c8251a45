#include "core/host_transfers.h"

namespace flashmace {

namespace {
thread_local HostTransfers* tally = nullptr;
}  // namespace

HostTransferScope::HostTransferScope(HostTransfers* t) : enclosing_(tally) { tally = t; }

HostTransferScope::~HostTransferScope() { tally = enclosing_; }

void count_to_device(int64_t bytes) {
  if (!tally || bytes <= 0) return;
  tally->to_device_bytes += bytes;
  ++tally->copies;
}

void count_to_host(int64_t bytes) {
  if (!tally || bytes <= 0) return;
  tally->to_host_bytes += bytes;
  ++tally->copies;
}

}  // namespace flashmace
