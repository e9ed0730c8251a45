// The sanitized tests' negative control: each mode commits one error that the sanitizer set-up of
// tests/reliability/sanitize must report and turn into a failing exit status (expect_report.sh checks both), in a
// process that loads LibTorch like the twins do.
//   sanitizer_canary heap-overflow   reads one element past a new[] block (ASan)
//   sanitizer_canary int-overflow    overflows a signed int (UBSan, -fno-sanitize-recover)
//   sanitizer_canary leak            drops the last pointer to a block (LeakSanitizer at exit)
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/irreps.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  // Keeps LibTorch's and flashmace's libraries in the process (as in the twins), not just linked.
  std::printf("canary: %s with %s\n", argv[1], flashmace::Irreps::parse("8x0e+8x1o").str().c_str());
  volatile int index = 4;
  if (std::strcmp(argv[1], "heap-overflow") == 0) {
    auto block = std::make_unique<int[]>(4);
    return block[index];
  }
  if (std::strcmp(argv[1], "int-overflow") == 0) {
    volatile int big = INT_MAX;
    return big + index > 0 ? 0 : 3;
  }
  if (std::strcmp(argv[1], "leak") == 0) {
    volatile int* lost = new int[1024];
    lost[index] = 1;
    lost = nullptr;
    return 0;
  }
  return 2;
}
