// Negative control of the skip protocol (test_main.cpp): run by expect_exit.sh, never discovered as
// tests of its own. A case that skips must exit with the skip code; a case that fails must exit 1
// even when it prints what once made CTest count it as skipped (SKIP_REGULAR_EXPRESSION "SKIPPED").
#include <gtest/gtest.h>

#include <cstdio>

namespace {

TEST(SkipProtocol, SkipsCleanly) { GTEST_SKIP() << "no GPU on this machine"; }

TEST(SkipProtocol, FailsAfterPrintingSkipped) {
  std::printf("[  SKIPPED ] a failing GPU test that mentions the word\n");
  ADD_FAILURE() << "this case must count as failed";
}

}  // namespace
