#pragma once
// A flashmace model file: one safetensors file whose __metadata__["flashmace"] holds the MaceConfig
// JSON and whose tensors are MACE's state_dict (docs/model-format.md). Validated on load: every
// tensor the math needs must exist with the dtype and shape the hyperparameters imply, every float
// value must be finite, and the metadata's atomic_energies must equal the E0 tensor.
#include <map>
#include <string>

#include "core/mace_config.h"
#include "core/safetensors.h"

namespace flashmace {

class ModelFile {
 public:
  static ModelFile load(const std::string& path);  // throws flashmace::Error naming file and tensor
  static ModelFile from_safetensors(SafetensorsFile file);

  const MaceConfig& config() const { return config_; }
  const SafetensorsFile& file() const { return file_; }
  const std::string& path() const { return file_.path(); }
  const TensorView& tensor(const std::string& key) const { return file_.tensor(key); }
  bool has(const std::string& key) const { return file_.has(key); }

  // One head of the model as a one-head model ("": the default head, MaceConfig::default_head):
  // its E0s, scale and shift, and its readout weights (the last readout's hidden block of that
  // head, whose output weights are rescaled by 1/sqrt(heads): e3nn normalises by the fan-in, which
  // the other heads' blocks no longer add to). A name that is not a head throws, listing the heads.
  ModelFile select_head(const std::string& name) const;

  // Rewrites the file from its parts (metadata verbatim, every tensor byte for byte).
  void save(const std::string& path) const;

 private:
  SafetensorsFile file_;
  MaceConfig config_;
};

// Expected tensors for a config: key -> shape (-1 = any size) and whether it is a float tensor
// (in the model dtype) or an integer/bool buffer. Used by the validator and by tests.
struct ExpectedTensor {
  std::vector<int64_t> shape;
  enum Kind { Float, Integer, Bool } kind = Float;
};
std::map<std::string, ExpectedTensor> expected_tensors(const MaceConfig& config);

}  // namespace flashmace
