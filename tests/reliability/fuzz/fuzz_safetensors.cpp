// libFuzzer target: arbitrary bytes as a safetensors file. Rejections must be flashmace::Error;
// anything else (another exception, a sanitizer report, a crash) is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const flashmace::SafetensorsFile f =
        flashmace::SafetensorsFile::parse(std::vector<unsigned char>(data, data + size), "fuzz input");
    // Touch every tensor's bytes: views must stay inside the buffer.
    for (const auto& name : f.names()) {
      const flashmace::TensorView& t = f.tensor(name);
      volatile unsigned char sink = 0;
      for (std::size_t i = 0; i < t.nbytes; ++i) sink = sink ^ t.data[i];
      (void)sink;
    }
  } catch (const flashmace::Error&) {
  }
  return 0;
}
