// The safetensors container: round trips are bit-identical for every dtype and shape, and every
// kind of corruption is reported with the file's name and what is wrong. All comparisons are exact
// (memcmp or ==): the container copies bytes and must never change one.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>

#include "core/safetensors.h"
#include "test_support.h"

namespace flashmace {
namespace {

// A tensor whose bytes are a recognisable pattern, different for every seed.
TensorBytes tensor_of(DType dtype, std::vector<int64_t> shape, unsigned char seed) {
  std::size_t numel = 1;
  for (int64_t d : shape) numel *= static_cast<std::size_t>(d);
  TensorBytes t{dtype, std::move(shape), std::vector<unsigned char>(numel * dtype_size(dtype))};
  for (std::size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<unsigned char>(seed + 7 * i);
  return t;
}

// Every dtype, plus the shapes that are easy to get wrong: 0-d scalars and tensors with no elements.
std::map<std::string, TensorBytes> sample_tensors() {
  return {{"a.f64", tensor_of(DType::F64, {2, 3}, 1)},
          {"b.f32", tensor_of(DType::F32, {5}, 2)},
          {"c.scalar", tensor_of(DType::I64, {}, 3)},
          {"d.empty", tensor_of(DType::F64, {0}, 4)},
          {"e.bool", tensor_of(DType::BOOL, {3}, 5)},
          {"f.i32", tensor_of(DType::I32, {1, 1, 2}, 6)},
          {"g.empty3d", tensor_of(DType::F32, {2, 0, 3}, 7)},
          {"h.f16", tensor_of(DType::F16, {3}, 8)},
          {"i.bf16", tensor_of(DType::BF16, {2, 2}, 9)},
          {"j.i16", tensor_of(DType::I16, {3}, 10)},
          {"k.i8", tensor_of(DType::I8, {4}, 11)},
          {"l.u8", tensor_of(DType::U8, {1}, 12)},
          {"m.f64scalar", tensor_of(DType::F64, {}, 13)}};
}

const std::map<std::string, std::string> kMetadata = {{"flashmace", "{\"x\": 1}"}, {"other", "y"}, {"empty", ""}};

void expect_holds_exactly(const SafetensorsFile& f, const std::map<std::string, std::string>& metadata,
                          const std::map<std::string, TensorBytes>& tensors) {
  EXPECT_EQ(f.metadata(), metadata);
  std::vector<std::string> names;
  for (const auto& kv : tensors) names.push_back(kv.first);
  ASSERT_EQ(f.names(), names);
  for (const auto& [name, t] : tensors) {
    const TensorView& v = f.tensor(name);
    EXPECT_EQ(v.dtype, t.dtype) << name;
    EXPECT_EQ(v.shape, t.shape) << name;
    EXPECT_EQ(v.numel() * static_cast<int64_t>(dtype_size(v.dtype)), static_cast<int64_t>(t.bytes.size())) << name;
    ASSERT_EQ(v.nbytes, t.bytes.size()) << name;
    if (v.nbytes > 0) {  // an empty vector's data() may be null, which memcmp must not see
      EXPECT_EQ(0, std::memcmp(v.data, t.bytes.data(), v.nbytes)) << name;
    }
  }
}

uint64_t header_length(const std::vector<unsigned char>& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  return n;
}

std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Safetensors, SerializeThenParseIsBitIdenticalForEveryDtypeAndShape) {
  const auto tensors = sample_tensors();
  const std::vector<unsigned char> bytes = serialize_safetensors(kMetadata, tensors);
  // The header is padded so that the data section starts 8-byte aligned (F64 views stay aligned).
  EXPECT_EQ(header_length(bytes) % 8, 0u);
  expect_holds_exactly(SafetensorsFile::parse(bytes, "memory"), kMetadata, tensors);
}

TEST(Safetensors, WriteThenLoadOnDiskIsBitIdentical) {
  const std::string path = ::testing::TempDir() + "/roundtrip.safetensors";
  const auto tensors = sample_tensors();
  write_safetensors(path, kMetadata, tensors);
  EXPECT_EQ(read_bytes(path), serialize_safetensors(kMetadata, tensors));
  const SafetensorsFile f = SafetensorsFile::load(path);
  EXPECT_EQ(f.path(), path);
  expect_holds_exactly(f, kMetadata, tensors);
}

TEST(Safetensors, ReserializingAParsedFileReproducesItsBytes) {
  const std::vector<unsigned char> bytes = serialize_safetensors(kMetadata, sample_tensors());
  const SafetensorsFile f = SafetensorsFile::parse(bytes, "memory");
  std::map<std::string, TensorBytes> again;
  for (const auto& name : f.names()) {
    const TensorView& v = f.tensor(name);
    again[name] = TensorBytes{v.dtype, v.shape, std::vector<unsigned char>(v.data, v.data + v.nbytes)};
  }
  EXPECT_EQ(serialize_safetensors(f.metadata(), again), bytes);
}

TEST(Safetensors, NoTensorsAndNoMetadataRoundTrip) {
  const SafetensorsFile f = SafetensorsFile::parse(serialize_safetensors({}, {}), "memory");
  EXPECT_TRUE(f.names().empty());
  EXPECT_TRUE(f.metadata().empty());
}

TEST(Safetensors, DtypeNamesSizesAndParsingAgreeWithTheSafetensorsSpec) {
  const std::vector<std::tuple<DType, std::string, std::size_t>> spec = {
      {DType::F64, "F64", 8}, {DType::F32, "F32", 4},  {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
      {DType::I64, "I64", 8}, {DType::I32, "I32", 4},  {DType::I16, "I16", 2}, {DType::I8, "I8", 1},
      {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1}};
  for (const auto& [dtype, name, size] : spec) {
    EXPECT_EQ(dtype_name(dtype), name);
    EXPECT_EQ(dtype_size(dtype), size) << name;
    DType parsed = DType::BOOL == dtype ? DType::F64 : DType::BOOL;
    EXPECT_TRUE(parse_dtype(name, &parsed)) << name;
    EXPECT_EQ(parsed, dtype) << name;
  }
  DType untouched = DType::I8;
  for (const char* bad : {"f64", "F128", "", "FLOAT64", " F64"}) {
    EXPECT_FALSE(parse_dtype(bad, &untouched)) << bad;
    EXPECT_EQ(untouched, DType::I8) << bad;
  }
}

TEST(Safetensors, ToDoublesConvertsEveryIntegerAndFloatDtype) {
  auto of = [](DType dtype, const auto& values) {
    TensorBytes t{dtype, {static_cast<int64_t>(std::size(values))}, std::vector<unsigned char>(sizeof(values))};
    std::memcpy(t.bytes.data(), &values, sizeof(values));
    return t;
  };
  const double f64[] = {1e300, -0.1};
  const float f32[] = {1.5f, -0.25f};
  const int64_t i64[] = {-(int64_t{1} << 53), 9};
  const int32_t i32[] = {-3, 7};
  const int16_t i16[] = {-32768, 32767};
  const int8_t i8[] = {-128, 127};
  const uint8_t u8[] = {0, 255};
  const uint8_t b[] = {1, 0};
  const SafetensorsFile f = SafetensorsFile::parse(serialize_safetensors({}, {{"f64", of(DType::F64, f64)},
                                                                              {"f32", of(DType::F32, f32)},
                                                                              {"i64", of(DType::I64, i64)},
                                                                              {"i32", of(DType::I32, i32)},
                                                                              {"i16", of(DType::I16, i16)},
                                                                              {"i8", of(DType::I8, i8)},
                                                                              {"u8", of(DType::U8, u8)},
                                                                              {"bool", of(DType::BOOL, b)},
                                                                              {"f16", tensor_of(DType::F16, {2}, 0)}}),
                                                   "numbers.safetensors");
  EXPECT_EQ(f.to_doubles("f64"), (std::vector<double>{1e300, -0.1}));
  EXPECT_EQ(f.to_doubles("f32"), (std::vector<double>{1.5, -0.25}));
  EXPECT_EQ(f.to_doubles("i64"), (std::vector<double>{-9007199254740992.0, 9.0}));
  EXPECT_EQ(f.to_doubles("i32"), (std::vector<double>{-3.0, 7.0}));
  EXPECT_EQ(f.to_doubles("i16"), (std::vector<double>{-32768.0, 32767.0}));
  EXPECT_EQ(f.to_doubles("i8"), (std::vector<double>{-128.0, 127.0}));
  EXPECT_EQ(f.to_doubles("u8"), (std::vector<double>{0.0, 255.0}));
  EXPECT_EQ(f.to_doubles("bool"), (std::vector<double>{1.0, 0.0}));
  // Half precision is stored but not converted; the refusal names file, tensor and dtype.
  const std::string msg = testing::error_of([&] { f.to_doubles("f16"); });
  EXPECT_NE(msg.find("File numbers.safetensors: tensor 'f16' has dtype F16"), std::string::npos) << msg;
}

TEST(Safetensors, SerializeRefusesBytesThatDoNotMatchDtypeAndShape) {
  TensorBytes t = tensor_of(DType::F64, {2, 2}, 0);
  t.bytes.pop_back();
  const std::string msg = testing::error_of([&] { serialize_safetensors({}, {{"w", t}}); });
  EXPECT_NE(msg.find("Cannot write tensor 'w'"), std::string::npos) << msg;
}

// File layout: 8-byte little-endian header length, the header text, `data_bytes` zero bytes.
std::vector<unsigned char> file_with_header(const std::string& header, std::size_t data_bytes) {
  std::vector<unsigned char> out(8);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

std::string tensor_header(const std::string& entry) { return "{\"t\":" + entry + "}"; }

TEST(Safetensors, EveryCorruptionIsReportedWithTheFileAndWhatIsWrong) {
  std::vector<unsigned char> header_past_end = file_with_header("{}", 0);
  header_past_end[0] = 200;
  std::vector<unsigned char> data_cut_short = serialize_safetensors({}, {{"t", tensor_of(DType::F64, {6}, 0)}});
  data_cut_short.resize(data_cut_short.size() - 4);

  const std::vector<std::pair<std::vector<unsigned char>, std::string>> cases = {
      {{1, 2, 3}, "truncated: shorter than the 8-byte header length"},
      {header_past_end, "truncated: header length 200 exceeds the 2 bytes that follow it"},
      {data_cut_short, "tensor 't': data offsets [0, 48) out of range: the data section has 44 bytes"},
      {file_with_header("{not json", 0), "bad header JSON ("},
      {file_with_header("[1,2]", 0), "bad header JSON: not an object"},
      {file_with_header(R"({"__metadata__":"x"})", 0), "bad header JSON: __metadata__ is not an object"},
      {file_with_header(R"({"__metadata__":{"k":1}})", 0), "bad header JSON: __metadata__ entry 'k' is not a string"},
      {file_with_header(tensor_header(R"({"dtype":"F64","shape":[1]})"), 8),
       "tensor 't': bad header JSON: needs dtype, shape and data_offsets"},
      {file_with_header(tensor_header("[1]"), 8), "tensor 't': bad header JSON: needs dtype, shape and data_offsets"},
      {file_with_header(tensor_header(R"({"dtype":"F99","shape":[1],"data_offsets":[0,8]})"), 8),
       "tensor 't': unknown dtype \"F99\""},
      {file_with_header(tensor_header(R"({"dtype":8,"shape":[1],"data_offsets":[0,8]})"), 8),
       "tensor 't': unknown dtype 8"},
      {file_with_header(tensor_header(R"({"dtype":"F64","shape":1,"data_offsets":[0,8]})"), 8),
       "tensor 't': bad header JSON: shape is not an array"},
      {file_with_header(tensor_header(R"({"dtype":"F64","shape":[-1],"data_offsets":[0,8]})"), 8),
       "tensor 't': bad header JSON: shape entries must be non-negative integers"},
      {file_with_header(tensor_header(R"({"dtype":"F64","shape":[1.5],"data_offsets":[0,8]})"), 8),
       "tensor 't': bad header JSON: shape entries must be non-negative integers"},
      {file_with_header(tensor_header(R"({"dtype":"F64","shape":[1],"data_offsets":[-8,0]})"), 8),
       "tensor 't': bad header JSON: data_offsets must be two non-negative integers"},
      {file_with_header(tensor_header(R"({"dtype":"F64","shape":[1],"data_offsets":[8]})"), 8),
       "tensor 't': bad header JSON: data_offsets must be two non-negative integers"},
      {file_with_header(tensor_header(R"({"dtype":"F64","shape":[1],"data_offsets":[8,0]})"), 8),
       "tensor 't': data offsets [8, 0) out of range"},
      {file_with_header(tensor_header(R"({"dtype":"F64","shape":[2],"data_offsets":[0,16]})"), 8),
       "tensor 't': data offsets [0, 16) out of range: the data section has 8 bytes"},
      {file_with_header(tensor_header(R"({"dtype":"F64","shape":[2],"data_offsets":[0,8]})"), 8),
       "tensor 't': holds 8 bytes but dtype F64 and its shape need 16"},
  };
  for (const auto& [bytes, phrase] : cases) {
    const std::string msg = testing::error_of([&] { SafetensorsFile::parse(bytes, "corrupt.safetensors"); });
    EXPECT_EQ(msg.rfind("File corrupt.safetensors: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << msg;
  }
}

TEST(Safetensors, LoadNamesTheFileThatCannotBeOpenedOrIsCorrupt) {
  const std::string missing = ::testing::TempDir() + "/does_not_exist.safetensors";
  EXPECT_EQ(testing::error_of([&] { SafetensorsFile::load(missing); }),
            "Cannot open model file " + missing + ": no such file or not readable");
  const std::string cut = ::testing::TempDir() + "/cut.safetensors";
  {
    const std::vector<unsigned char> bytes = serialize_safetensors(kMetadata, sample_tensors());
    std::ofstream(cut, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 20);
  }
  const std::string msg = testing::error_of([&] { SafetensorsFile::load(cut); });
  EXPECT_EQ(msg.rfind("File " + cut + ": truncated: header length", 0), 0u) << msg;
}

TEST(Safetensors, LoadRefusesADirectoryByName) {
  const std::string dir = ::testing::TempDir() + "/model_dir.safetensors";
  std::filesystem::create_directories(dir);
  EXPECT_EQ(testing::error_of([&] { SafetensorsFile::load(dir); }),
            "Cannot open model file " + dir + ": it is a directory");
}

TEST(Safetensors, AskingForAnAbsentTensorNamesFileAndTensor) {
  const SafetensorsFile f = SafetensorsFile::parse(serialize_safetensors({}, {}), "empty.safetensors");
  EXPECT_FALSE(f.has("w"));
  EXPECT_EQ(testing::error_of([&] { f.tensor("w"); }), "File empty.safetensors: missing tensor 'w'");
}

}  // namespace
}  // namespace flashmace
