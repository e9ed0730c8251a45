// core/host_transfers.h: copies counted into the innermost live scope of their thread, nothing
// counted without one, and an inner scope handing the count back to the outer one when it ends.
#include "core/host_transfers.h"

#include <gtest/gtest.h>

#include <thread>

namespace flashmace {
namespace {

TEST(HostTransfers, CountsIntoTheLiveScopeOnly) {
  count_to_device(100);  // no scope: not counted anywhere
  HostTransfers outer;
  {
    const HostTransferScope scope(&outer);
    count_to_device(24);
    count_to_host(80);
    count_to_host(0);  // an empty copy is none
    HostTransfers inner;
    {
      const HostTransferScope nested(&inner);
      count_to_host(8);
    }
    count_to_device(16);
    EXPECT_EQ(inner.to_host_bytes, 8);
    EXPECT_EQ(inner.copies, 1);
    // Another thread has no scope: its copies are not this thread's.
    std::thread([] { count_to_host(1 << 20); }).join();
  }
  count_to_host(7);  // after the scope: not counted
  EXPECT_EQ(outer.to_device_bytes, 40);
  EXPECT_EQ(outer.to_host_bytes, 80);
  EXPECT_EQ(outer.copies, 3);

  HostTransfers sum = outer;
  sum += outer;
  EXPECT_EQ(sum.to_device_bytes, 80);
  EXPECT_EQ(sum.to_host_bytes, 160);
  EXPECT_EQ(sum.copies, 6);
}

}  // namespace
}  // namespace flashmace
