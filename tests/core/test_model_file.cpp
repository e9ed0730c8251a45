// Model files: every shared reference model survives export -> load -> save -> load bit for bit,
// holds exactly MACE's own tensors and hyperparameters, and every kind of damage is refused with a
// message that names the file and the tensor or metadata entry at fault. All comparisons are exact:
// files copy bytes, and the hyperparameters are copied numbers, not computed ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/model_file.h"
#include "test_support.h"

namespace flashmace {
namespace {

bool same_tensor(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes &&
         (a.nbytes == 0 || std::memcmp(a.data, b.data, a.nbytes) == 0);
}

class ModelFileCase : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelFileCase, SaveThenLoadIsBitIdentical) {
  const ModelFile m = ModelFile::load(testing::exported_model(GetParam()));
  const std::string copy = ::testing::TempDir() + "/roundtrip_" + GetParam() + ".safetensors";
  m.save(copy);
  const ModelFile again = ModelFile::load(copy);
  EXPECT_EQ(again.file().metadata(), m.file().metadata());
  EXPECT_EQ(mace_config_to_json(again.config()), mace_config_to_json(m.config()));
  ASSERT_EQ(again.file().names(), m.file().names());
  for (const auto& name : m.file().names()) EXPECT_TRUE(same_tensor(again.tensor(name), m.tensor(name))) << name;
}

TEST_P(ModelFileCase, TensorsAreMacesStateDictBitForBit) {
  const ModelFile m = ModelFile::load(testing::exported_model(GetParam()));
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  std::vector<std::string> ref_keys;
  for (const auto& name : ref.names())
    if (name.rfind("model.", 0) == 0) ref_keys.push_back(name.substr(6));
  // Same key set (both lists are sorted), then every tensor's dtype, shape and bytes.
  ASSERT_EQ(m.file().names(), ref_keys);
  for (const auto& key : ref_keys) EXPECT_TRUE(same_tensor(m.tensor(key), ref.tensor("model." + key))) << key;
}

TEST_P(ModelFileCase, HyperparametersEqualMacesExtractConfig) {
  const ModelFile m = ModelFile::load(testing::exported_model(GetParam()));
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(GetParam()));
  const auto cfg = nlohmann::json::parse(ref.metadata().at("json")).at("extract_config_mace_model");
  const MaceConfig& c = m.config();
  EXPECT_EQ(c.dtype, "float64");
  EXPECT_EQ(c.r_max, cfg.at("r_max").get<double>());
  EXPECT_EQ(c.num_bessel, cfg.at("num_bessel").get<int>());
  EXPECT_EQ(c.num_polynomial_cutoff, cfg.at("num_polynomial_cutoff").get<int>());
  EXPECT_EQ(c.max_ell, cfg.at("max_ell").get<int>());
  EXPECT_EQ(c.hidden_irreps, cfg.at("hidden_irreps").get<std::string>());
  EXPECT_EQ(c.mlp_irreps, cfg.at("MLP_irreps").get<std::string>());
  EXPECT_EQ(c.radial_mlp, cfg.at("radial_MLP").get<std::vector<int>>());
  EXPECT_EQ(c.num_interactions, cfg.at("num_interactions").get<int>());
  EXPECT_EQ(c.interaction_cls_first, cfg.at("interaction_cls_first").get<std::string>());
  EXPECT_EQ(c.interaction_cls, cfg.at("interaction_cls").get<std::string>());
  EXPECT_EQ(c.atomic_numbers, cfg.at("atomic_numbers").get<std::vector<int>>());
  EXPECT_EQ(c.atomic_energies, cfg.at("atomic_energies").get<std::vector<double>>());
  // MACE reports one avg_num_neighbors and one correlation for all layers; we store one per layer.
  ASSERT_EQ(c.avg_num_neighbors.size(), static_cast<std::size_t>(c.num_interactions));
  ASSERT_EQ(c.correlation.size(), static_cast<std::size_t>(c.num_interactions));
  for (int t = 0; t < c.num_interactions; ++t) {
    EXPECT_EQ(c.avg_num_neighbors[t], cfg.at("avg_num_neighbors").get<double>()) << t;
    EXPECT_EQ(c.correlation[t], cfg.at("correlation").get<int>()) << t;
  }
  EXPECT_EQ(c.scale, std::vector<double>{cfg.at("atomic_inter_scale").get<double>()});
  EXPECT_EQ(c.shift, std::vector<double>{cfg.at("atomic_inter_shift").get<double>()});
}

// The float32 export is the float64 model with every F64 tensor rounded to nearest float (what
// torch's .float() does); integer and bool buffers are untouched.
TEST_P(ModelFileCase, Float32ExportIsTheRoundedFloat64Model) {
  const ModelFile f32 = ModelFile::load(testing::exported_model(GetParam() + "_f32"));
  const ModelFile f64 = ModelFile::load(testing::exported_model(GetParam()));
  EXPECT_EQ(f32.config().dtype, "float32");
  ASSERT_EQ(f32.file().names(), f64.file().names());
  for (const auto& name : f64.file().names()) {
    const TensorView& wide = f64.tensor(name);
    const TensorView& narrow = f32.tensor(name);
    if (wide.dtype != DType::F64) {
      EXPECT_TRUE(same_tensor(narrow, wide)) << name;
      continue;
    }
    ASSERT_EQ(narrow.dtype, DType::F32) << name;
    ASSERT_EQ(narrow.shape, wide.shape) << name;
    const std::vector<double> w = f64.file().to_doubles(name), n = f32.file().to_doubles(name);
    for (std::size_t i = 0; i < w.size(); ++i)
      ASSERT_EQ(n[i], static_cast<double>(static_cast<float>(w[i]))) << name << "[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(SharedReference, ModelFileCase, ::testing::Values("small_l1", "scalar_l0", "large_l2"),
                         [](const auto& info) { return info.param; });

// mace_spec.md 6: layer 0 reads Cx0e, later layers the hidden irreps; the last layer outputs Cx0e;
// the interaction target is (sh * C).sort().simplify().
TEST(MaceConfig, DerivedIrrepsFollowMacesConstruction) {
  const MaceConfig c = ModelFile::load(testing::exported_model("small_l1")).config();
  EXPECT_EQ(c.channels(), 16);
  EXPECT_EQ(c.num_elements(), 2);
  EXPECT_EQ(c.sh_irreps().str(), "1x0e+1x1o+1x2e+1x3o");
  EXPECT_EQ(c.interaction_target().str(), "16x0e+16x1o+16x2e+16x3o");
  EXPECT_EQ(c.layer_input(0).str(), "16x0e");
  EXPECT_EQ(c.layer_output(0).str(), "16x0e+16x1o");
  EXPECT_EQ(c.layer_input(1).str(), "16x0e+16x1o");
  EXPECT_EQ(c.layer_output(1).str(), "16x0e");
  EXPECT_TRUE(c.residual(0));
  EXPECT_FALSE(c.density(0));
  EXPECT_EQ(c.element_index(28), 0);
  EXPECT_EQ(c.element_index(29), 1);
  EXPECT_EQ(c.element_index(1), -1);
  const MaceConfig s = ModelFile::load(testing::exported_model("scalar_l0")).config();
  EXPECT_FALSE(s.residual(0));  // RealAgnosticInteractionBlock first
  EXPECT_TRUE(s.residual(1));
}

TEST(MaceConfig, JsonRoundTripKeepsEveryField) {
  const MaceConfig c = ModelFile::load(testing::exported_model("large_l2")).config();
  const std::string json = mace_config_to_json(c);
  EXPECT_EQ(mace_config_to_json(parse_mace_config(json, "memory")), json);
}

TEST(Elements, SymbolsAndAtomicNumbersAreInverse) {
  for (int z = 1; z <= 118; ++z) EXPECT_EQ(atomic_number_from_symbol(element_symbol(z)), z) << z;
  EXPECT_STREQ(element_symbol(1), "H");
  EXPECT_STREQ(element_symbol(6), "C");
  EXPECT_STREQ(element_symbol(14), "Si");
  EXPECT_STREQ(element_symbol(28), "Ni");
  EXPECT_STREQ(element_symbol(29), "Cu");
  EXPECT_STREQ(element_symbol(83), "Bi");
  EXPECT_STREQ(element_symbol(94), "Pu");
  EXPECT_STREQ(element_symbol(118), "Og");
  for (int z : {-1, 0, 119}) EXPECT_STREQ(element_symbol(z), "") << z;
  // Symbols are case-sensitive, as in ASE: "CO" is not cobalt.
  for (const char* bad : {"", "Xx", "cu", "CU", "CO", " Cu"}) EXPECT_EQ(atomic_number_from_symbol(bad), 0) << bad;
}

TEST(ModelFile, LoadNamesAMissingFile) {
  const std::string missing = ::testing::TempDir() + "/no_model.safetensors";
  const std::string msg = testing::error_of([&] { ModelFile::load(missing); });
  EXPECT_NE(msg.find("Cannot open model file " + missing), std::string::npos) << msg;
}

// One exported model, damaged in memory; the loader must refuse it and say what is wrong.
class DamagedModel : public ::testing::Test {
 protected:
  void SetUp() override { copy_of("small_l1"); }
  // Replaces the copy with the exported model `model`.
  void copy_of(const std::string& model) {
    const ModelFile m = ModelFile::load(testing::exported_model(model));
    metadata_ = m.file().metadata();
    tensors_.clear();
    for (const auto& name : m.file().names()) {
      const TensorView& v = m.tensor(name);
      tensors_[name] = TensorBytes{v.dtype, v.shape, std::vector<unsigned char>(v.data, v.data + v.nbytes)};
    }
  }
  std::string load_error() const {
    return testing::error_of([&] {
      ModelFile::from_safetensors(
          SafetensorsFile::parse(serialize_safetensors(metadata_, tensors_), "damaged.safetensors"));
    });
  }
  // Every refusal starts with the file's name and contains the phrase that says what is wrong.
  void expect_refused_with(const std::string& phrase) const {
    const std::string msg = load_error();
    EXPECT_EQ(msg.rfind("Model file damaged.safetensors: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
  }
  nlohmann::json config_json() const { return nlohmann::json::parse(metadata_.at(kMetadataKey)); }
  void set_config_json(const nlohmann::json& doc) { metadata_[kMetadataKey] = doc.dump(); }
  void edit_config(const std::string& key, const nlohmann::json& value) {
    auto doc = config_json();
    doc[key] = value;
    set_config_json(doc);
  }
  // Re-type a float tensor as F32 with the matching byte count.
  void make_f32(const std::string& key) {
    TensorBytes& t = tensors_.at(key);
    t.dtype = DType::F32;
    t.bytes.resize(t.bytes.size() / 2);
  }
  // Overwrites value `index` (flat) of an F64 tensor.
  void set_f64(const std::string& key, std::size_t index, double value) {
    TensorBytes& t = tensors_.at(key);
    ASSERT_EQ(t.dtype, DType::F64) << key;
    ASSERT_LE((index + 1) * sizeof value, t.bytes.size()) << key;
    std::memcpy(t.bytes.data() + index * sizeof value, &value, sizeof value);
  }

  std::map<std::string, std::string> metadata_;
  std::map<std::string, TensorBytes> tensors_;
};

TEST_F(DamagedModel, UndamagedCopyLoads) { EXPECT_EQ(load_error(), "<no error>"); }

TEST_F(DamagedModel, MissingRequiredTensorIsNamed) {
  tensors_.erase("interactions.0.linear_up.weight");
  expect_refused_with("missing tensor 'interactions.0.linear_up.weight' required by the model's hyperparameters");
}

TEST_F(DamagedModel, WrongShapeIsNamedWithBothShapes) {
  TensorBytes& t = tensors_.at("interactions.1.conv_tp_weights.layer3.weight");
  ASSERT_EQ(t.shape, (std::vector<int64_t>{16, 160}));  // 10 conv-TP paths x 16 channels (mace_spec.md 6)
  t.shape = {16, 80};
  t.bytes.resize(16 * 80 * 8);
  expect_refused_with("tensor 'interactions.1.conv_tp_weights.layer3.weight' has shape [16, 80], expected [16, 160]");
}

TEST_F(DamagedModel, Float32TensorInAFloat64ModelIsNamed) {
  make_f32("readouts.0.linear.weight");
  expect_refused_with("tensor 'readouts.0.linear.weight' has dtype F32, expected F64 (the model dtype is float64)");
}

TEST_F(DamagedModel, FloatElementListIsRefused) {
  TensorBytes& z = tensors_.at("atomic_numbers");
  z.dtype = DType::F64;  // same byte count as I64
  expect_refused_with("tensor 'atomic_numbers' has dtype F64, expected an integer dtype");
}

TEST_F(DamagedModel, ElementListDisagreeingWithMetadataIsRefused) {
  TensorBytes& z = tensors_.at("atomic_numbers");
  const int64_t cobalt = 27;
  std::memcpy(z.bytes.data(), &cobalt, sizeof cobalt);
  expect_refused_with("tensor 'atomic_numbers' disagrees with the metadata's atomic_numbers");
}

// Found by tests/reliability/fuzz (fuzz_model_file): an element number outside the int range was cast to int.
TEST_F(DamagedModel, ElementNumberOutsideTheIntRangeIsRefused) {
  TensorBytes& z = tensors_.at("atomic_numbers");
  const int64_t huge = -210453000000;
  std::memcpy(z.bytes.data(), &huge, sizeof huge);
  expect_refused_with("tensor 'atomic_numbers' disagrees with the metadata's atomic_numbers");
}

TEST_F(DamagedModel, ScWeightsMustMatchTheirCouplingTensor) {
  TensorBytes& t = tensors_.at("products.0.symmetric_contractions.contractions.1.weights.0");
  t.shape[1] = 5;
  t.bytes.resize(static_cast<std::size_t>(t.shape[0] * t.shape[1] * t.shape[2]) * 8);
  expect_refused_with(
      "tensor 'products.0.symmetric_contractions.contractions.1.weights.0' has 5 coupling paths but "
      "'products.0.symmetric_contractions.contractions.1.U_matrix_2' has");
}

// A NaN or Inf weight would make every evaluation print nan; the loader names the first one.
TEST_F(DamagedModel, NonFiniteWeightIsNamedWithItsFirstIndexAndCount) {
  const std::string key = "interactions.1.linear.weight";
  set_f64(key, 7, std::nan(""));
  set_f64(key, 20, -std::numeric_limits<double>::infinity());
  const std::size_t numel = tensors_.at(key).bytes.size() / sizeof(double);
  expect_refused_with(
      "tensor 'interactions.1.linear.weight' holds nan at flat index 7, the first of 2 non-finite "
      "values among " +
      std::to_string(numel) + " (a broken export or training run: re-export the model, or check the checkpoint)");
}

TEST_F(DamagedModel, InfiniteE0IsRefusedAsNonFinite) {
  set_f64("atomic_energies_fn.atomic_energies", 1, std::numeric_limits<double>::infinity());
  expect_refused_with(
      "tensor 'atomic_energies_fn.atomic_energies' holds inf at flat index 1, the only non-finite "
      "value among 2 (a broken export or training run: re-export the model, or check the checkpoint)");
}

// Evaluation adds the E0 tensor, reports subtract the metadata's atomic_energies: they must be the same numbers.
TEST_F(DamagedModel, E0MetadataDisagreeingWithTheTensorNamesTheElement) {
  set_f64("atomic_energies_fn.atomic_energies", 1, -4.25);  // Cu; readable numbers in the message
  auto doc = config_json();
  doc["atomic_energies"][1] = -4.25;
  set_config_json(doc);
  ASSERT_EQ(load_error(), "<no error>");
  doc["atomic_energies"][1] = -4.249;  // off by 1e-3
  set_config_json(doc);
  expect_refused_with(
      "tensor 'atomic_energies_fn.atomic_energies' holds E0 = -4.25 for Cu (Z = 29) but the "
      "metadata's atomic_energies hold -4.249; the two must agree (the engine uses the tensor, the "
      "exporter writes both): re-export the model with tools/export_mace.py");
}

// The float32 exporter rounds the E0 tensor but writes the float64 metadata: any metadata value that
// rounds to the stored float agrees; the next float does not.
TEST_F(DamagedModel, Float32E0IsComparedAtFloat32Precision) {
  copy_of("small_l1_f32");
  float e0 = 0;
  std::memcpy(&e0, tensors_.at("atomic_energies_fn.atomic_energies").bytes.data() + sizeof e0, sizeof e0);
  const float next = std::nextafter(e0, std::numeric_limits<float>::infinity());
  auto doc = config_json();
  doc["atomic_energies"][1] = static_cast<double>(e0) + 0.25 * (static_cast<double>(next) - e0);
  set_config_json(doc);
  EXPECT_EQ(load_error(), "<no error>");
  doc["atomic_energies"][1] = static_cast<double>(next);
  set_config_json(doc);
  expect_refused_with("for Cu (Z = 29) but the metadata's atomic_energies hold ");
}

TEST_F(DamagedModel, MissingMetadataMeansNotAFlashmaceModel) {
  metadata_.clear();
  expect_refused_with("no 'flashmace' metadata; this is not a flashmace model");
}

TEST_F(DamagedModel, ForeignFormatIsRefused) {
  edit_config("format", "gguf");
  expect_refused_with("not a flashmace model (format 'gguf')");
}

TEST_F(DamagedModel, UnsupportedModelTypeIsRefused) {
  edit_config("model_type", "nequip");
  expect_refused_with("unsupported model type 'nequip' (supported: mace)");
}

TEST_F(DamagedModel, UnknownFormatVersionIsRefused) {
  edit_config("format_version", 99);
  expect_refused_with("unknown format version 99 (this build reads version 1)");
}

TEST_F(DamagedModel, UnsupportedInteractionBlockClassIsRefused) {
  edit_config("interaction_cls", "RealAgnosticAttResidualInteractionBlock");
  expect_refused_with("unsupported interaction block class 'RealAgnosticAttResidualInteractionBlock'");
}

TEST_F(DamagedModel, MissingHyperparameterIsNamed) {
  auto doc = config_json();
  doc.erase("r_max");
  set_config_json(doc);
  expect_refused_with("metadata has no 'r_max'");
}

TEST_F(DamagedModel, HyperparameterOfTheWrongTypeIsNamed) {
  edit_config("num_bessel", "eight");
  expect_refused_with("metadata 'num_bessel' has the wrong type: \"eight\"");
}

TEST_F(DamagedModel, DistanceTransformOfTheWrongTypeIsNamed) {
  edit_config("distance_transform", 3);
  expect_refused_with("metadata 'distance_transform' must be a string or null");
}

TEST_F(DamagedModel, BadMetadataJsonIsReported) {
  metadata_[kMetadataKey] = "{ nope";
  expect_refused_with("bad metadata JSON (");
}

}  // namespace
}  // namespace flashmace
