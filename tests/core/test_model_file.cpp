// Model files: every shared reference model survives export -> load -> save -> load bit for bit,
// matches MACE's own tensors and hyperparameters, and every kind of damage is named precisely.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_file.h"
#include "test_support.h"

namespace flashmace {
namespace {

class ModelFileCase : public ::testing::TestWithParam<std::string> {};

bool same_tensor(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes && std::memcmp(a.data, b.data, a.nbytes) == 0;
}

TEST_P(ModelFileCase, SaveAndLoadRoundTripIsBitIdentical) {
  const ModelFile m = ModelFile::load(testing::exported_model(GetParam()));
  const std::string copy = ::testing::TempDir() + "/roundtrip_" + GetParam() + ".safetensors";
  m.save(copy);
  const ModelFile again = ModelFile::load(copy);
  EXPECT_EQ(again.file().metadata(), m.file().metadata());
  ASSERT_EQ(again.file().names(), m.file().names());
  for (const auto& name : m.file().names()) EXPECT_TRUE(same_tensor(again.tensor(name), m.tensor(name))) << name;
}

TEST_P(ModelFileCase, TensorsAndHyperparametersEqualOfficialMace) {
  const ModelFile m = ModelFile::load(testing::exported_model(GetParam()));
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  int compared = 0;
  for (const auto& name : ref.names()) {
    if (name.rfind("model.", 0) != 0) continue;
    ASSERT_TRUE(m.has(name.substr(6))) << name;
    EXPECT_TRUE(same_tensor(m.tensor(name.substr(6)), ref.tensor(name))) << name;
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(m.file().names().size()));

  const auto cfg = nlohmann::json::parse(ref.metadata().at("json"))["extract_config_mace_model"];
  const MaceConfig& c = m.config();
  EXPECT_EQ(c.r_max, cfg["r_max"].get<double>());
  EXPECT_EQ(c.num_bessel, cfg["num_bessel"].get<int>());
  EXPECT_EQ(c.num_polynomial_cutoff, cfg["num_polynomial_cutoff"].get<int>());
  EXPECT_EQ(c.max_ell, cfg["max_ell"].get<int>());
  EXPECT_EQ(c.hidden_irreps, cfg["hidden_irreps"].get<std::string>());
  EXPECT_EQ(c.atomic_numbers, cfg["atomic_numbers"].get<std::vector<int>>());
  EXPECT_EQ(c.atomic_energies, cfg["atomic_energies"].get<std::vector<double>>());
  EXPECT_EQ(c.interaction_cls_first, cfg["interaction_cls_first"].get<std::string>());
  for (int t = 0; t < c.num_interactions; ++t) {
    EXPECT_EQ(c.avg_num_neighbors[t], cfg["avg_num_neighbors"].get<double>());
    EXPECT_EQ(c.correlation[t], cfg["correlation"].get<int>());
  }
  EXPECT_EQ(c.scale, cfg["atomic_inter_scale"].get<double>());
  EXPECT_EQ(c.shift, cfg["atomic_inter_shift"].get<double>());
}

TEST_P(ModelFileCase, Float32ExportHasFloat32Weights) {
  const ModelFile m = ModelFile::load(testing::exported_model(GetParam() + "_f32"));
  EXPECT_EQ(m.config().dtype, "float32");
  EXPECT_EQ(m.tensor("node_embedding.linear.weight").dtype, DType::F32);
  EXPECT_EQ(m.tensor("atomic_numbers").dtype, DType::I64);
}

INSTANTIATE_TEST_SUITE_P(SharedReference, ModelFileCase, ::testing::Values("small_l1", "scalar_l0", "large_l2"),
                         [](const auto& info) { return info.param; });

// Damage one exported model in memory and return the loader's message.
class DamagedModel : public ::testing::Test {
 protected:
  void SetUp() override {
    const ModelFile m = ModelFile::load(testing::exported_model("small_l1"));
    metadata_ = m.file().metadata();
    for (const auto& name : m.file().names()) {
      const TensorView& v = m.tensor(name);
      tensors_[name] = TensorBytes{v.dtype, v.shape, std::vector<unsigned char>(v.data, v.data + v.nbytes)};
    }
  }
  std::string load_error() {
    try {
      ModelFile::from_safetensors(
          SafetensorsFile::parse(serialize_safetensors(metadata_, tensors_), "damaged.safetensors"));
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  }
  void edit_metadata(const std::string& key, const nlohmann::json& value) {
    auto doc = nlohmann::json::parse(metadata_.at(kMetadataKey));
    doc[key] = value;
    metadata_[kMetadataKey] = doc.dump();
  }
  std::map<std::string, std::string> metadata_;
  std::map<std::string, TensorBytes> tensors_;
};

TEST_F(DamagedModel, UndamagedLoads) { EXPECT_EQ(load_error(), "<no error>"); }

TEST_F(DamagedModel, MissingTensorIsNamed) {
  tensors_.erase("interactions.0.linear_up.weight");
  EXPECT_NE(load_error().find("Model file damaged.safetensors: missing tensor 'interactions.0.linear_up.weight'"),
            std::string::npos);
}

TEST_F(DamagedModel, WrongShapeIsNamed) {
  auto& t = tensors_["interactions.1.conv_tp_weights.layer3.weight"];
  t.shape = {16, 80};
  t.bytes.resize(16 * 80 * 8);
  const std::string msg = load_error();
  EXPECT_NE(msg.find("tensor 'interactions.1.conv_tp_weights.layer3.weight' has shape [16, 80], expected [16, 160]"),
            std::string::npos)
      << msg;
}

TEST_F(DamagedModel, WrongDtypeIsNamed) {
  auto& t = tensors_["readouts.0.linear.weight"];
  t.dtype = DType::F32;
  t.bytes.resize(t.bytes.size() / 2);
  EXPECT_NE(load_error().find("tensor 'readouts.0.linear.weight' has dtype F32, expected F64"), std::string::npos);
}

TEST_F(DamagedModel, ScWeightsMustMatchTheirCouplingTensor) {
  auto& t = tensors_["products.0.symmetric_contractions.contractions.1.weights.0"];
  t.shape[1] = 5;
  t.bytes.resize(2 * 5 * 16 * 8);
  EXPECT_NE(load_error().find("has 5 coupling paths but"), std::string::npos);
}

TEST_F(DamagedModel, MetadataProblemsAreNamed) {
  metadata_.erase(kMetadataKey);
  EXPECT_NE(load_error().find("this is not a flashmace model"), std::string::npos);
}

TEST_F(DamagedModel, UnsupportedModelTypeIsRefused) {
  edit_metadata("model_type", "nequip");
  EXPECT_NE(load_error().find("unsupported model type 'nequip'"), std::string::npos);
}

TEST_F(DamagedModel, UnknownFormatVersionIsRefused) {
  edit_metadata("format_version", 99);
  EXPECT_NE(load_error().find("unknown format version 99"), std::string::npos);
}

TEST_F(DamagedModel, UnsupportedBlockClassIsRefused) {
  edit_metadata("interaction_cls", "RealAgnosticAttResidualInteractionBlock");
  EXPECT_NE(load_error().find("unsupported interaction block class 'RealAgnosticAttResidualInteractionBlock'"),
            std::string::npos);
}

TEST_F(DamagedModel, MissingHyperparameterIsNamed) {
  auto doc = nlohmann::json::parse(metadata_.at(kMetadataKey));
  doc.erase("r_max");
  metadata_[kMetadataKey] = doc.dump();
  EXPECT_NE(load_error().find("metadata has no 'r_max'"), std::string::npos);
}

TEST_F(DamagedModel, BadMetadataJsonIsReported) {
  metadata_[kMetadataKey] = "{ nope";
  EXPECT_NE(load_error().find("bad metadata JSON"), std::string::npos);
}

}  // namespace
}  // namespace flashmace
