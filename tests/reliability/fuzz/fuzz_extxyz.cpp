// libFuzzer target: arbitrary text as an extended-XYZ frame. Rejections must be flashmace::Error;
// anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/xyz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const flashmace::Structure s =
        flashmace::parse_extxyz(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
    (void)s.size();
  } catch (const flashmace::Error&) {
  }
  return 0;
}
