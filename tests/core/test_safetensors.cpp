// The safetensors container: round trips are bit-identical, and every kind of corruption is
// reported with the file's name and what is wrong.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "core/safetensors.h"

namespace flashmace {
namespace {

TensorBytes tensor_of(DType dtype, std::vector<int64_t> shape, std::size_t nbytes, unsigned char seed) {
  TensorBytes t{dtype, std::move(shape), std::vector<unsigned char>(nbytes)};
  for (std::size_t i = 0; i < nbytes; ++i) t.bytes[i] = static_cast<unsigned char>(seed + 7 * i);
  return t;
}

std::string parse_error(std::vector<unsigned char> bytes) {
  try {
    SafetensorsFile::parse(std::move(bytes), "corrupt.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

std::vector<unsigned char> with_header(const std::string& header, std::size_t data_bytes) {
  std::vector<unsigned char> out(8);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

TEST(Safetensors, RoundTripIsBitIdentical) {
  std::map<std::string, TensorBytes> tensors = {
      {"a.f64", tensor_of(DType::F64, {2, 3}, 48, 1)}, {"b.f32", tensor_of(DType::F32, {5}, 20, 2)},
      {"c.scalar", tensor_of(DType::I64, {}, 8, 3)},   {"d.empty", tensor_of(DType::F64, {0}, 0, 4)},
      {"e.bool", tensor_of(DType::BOOL, {3}, 3, 5)},   {"f.i32", tensor_of(DType::I32, {1, 1, 2}, 8, 6)}};
  const std::map<std::string, std::string> metadata = {{"flashmace", "{\"x\": 1}"}, {"other", "y"}};
  const SafetensorsFile f = SafetensorsFile::parse(serialize_safetensors(metadata, tensors), "memory");
  EXPECT_EQ(f.metadata(), metadata);
  ASSERT_EQ(f.names().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const TensorView& v = f.tensor(name);
    EXPECT_EQ(v.dtype, t.dtype) << name;
    EXPECT_EQ(v.shape, t.shape) << name;
    ASSERT_EQ(v.nbytes, t.bytes.size()) << name;
    EXPECT_EQ(0, std::memcmp(v.data, t.bytes.data(), v.nbytes)) << name;
  }
  // The header is padded so the data section (and the first tensor, "a.f64") is 8-byte aligned.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.tensor("a.f64").data) % 8, 0u);
}

TEST(Safetensors, ToDoublesConvertsEveryNumericDtype) {
  TensorBytes i32{DType::I32, {2}, std::vector<unsigned char>(8)};
  const int32_t vals[2] = {-3, 7};
  std::memcpy(i32.bytes.data(), vals, 8);
  const SafetensorsFile f = SafetensorsFile::parse(serialize_safetensors({}, {{"x", i32}}), "memory");
  EXPECT_EQ(f.to_doubles("x"), (std::vector<double>{-3.0, 7.0}));
}

TEST(Safetensors, EveryCorruptionHasItsOwnMessage) {
  EXPECT_NE(parse_error({1, 2, 3}).find("truncated: shorter than the 8-byte header length"), std::string::npos);
  auto too_long = with_header("{}", 0);
  too_long[0] = 200;
  EXPECT_NE(parse_error(too_long).find("truncated: header length 200"), std::string::npos);
  EXPECT_NE(parse_error(with_header("{not json", 0)).find("bad header JSON"), std::string::npos);
  EXPECT_NE(parse_error(with_header("[1,2]", 0)).find("bad header JSON: not an object"), std::string::npos);
  EXPECT_NE(
      parse_error(with_header(R"({"t":{"dtype":"F99","shape":[1],"data_offsets":[0,8]}})", 8)).find("unknown dtype"),
      std::string::npos);
  EXPECT_NE(
      parse_error(with_header(R"({"t":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", 8)).find("out of range"),
      std::string::npos);
  EXPECT_NE(parse_error(with_header(R"({"t":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", 8))
                .find("holds 8 bytes but dtype F64 and its shape need 16"),
            std::string::npos);
  EXPECT_NE(
      parse_error(with_header(R"({"t":{"dtype":"F64","shape":[-1],"data_offsets":[0,8]}})", 8)).find("non-negative"),
      std::string::npos);
  EXPECT_NE(
      parse_error(with_header(R"({"t":{"dtype":"F64","shape":[1]}})", 8)).find("needs dtype, shape and data_offsets"),
      std::string::npos);
  EXPECT_NE(parse_error(with_header(R"({"__metadata__":{"k":1}})", 0)).find("is not a string"), std::string::npos);
  // Every message names the file.
  EXPECT_NE(parse_error({1}).find("corrupt.safetensors"), std::string::npos);
}

TEST(Safetensors, MissingFilesAndTensorsAreNamed) {
  try {
    SafetensorsFile::load("/nonexistent/dir/model.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Cannot open model file /nonexistent/dir/model.safetensors"),
              std::string::npos);
  }
  const SafetensorsFile f = SafetensorsFile::parse(serialize_safetensors({}, {}), "empty.safetensors");
  try {
    f.tensor("w");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "File empty.safetensors: missing tensor 'w'");
  }
}

}  // namespace
}  // namespace flashmace
