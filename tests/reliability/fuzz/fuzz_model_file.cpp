// libFuzzer target: arbitrary bytes as a flashmace model file (safetensors + the MaceConfig JSON in
// its metadata, validated against the tensors the hyperparameters imply). Rejections must be
// flashmace::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const flashmace::ModelFile m = flashmace::ModelFile::from_safetensors(
        flashmace::SafetensorsFile::parse(std::vector<unsigned char>(data, data + size), "fuzz input"));
    (void)m.config().num_elements();
  } catch (const flashmace::Error&) {
  }
  return 0;
}
