#include "core/safetensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace flashmace {

namespace {

struct DTypeEntry {
  DType dtype;
  const char* name;
  std::size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::F64, "F64", 8}, {DType::F32, "F32", 4},   {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
    {DType::I64, "I64", 8}, {DType::I32, "I32", 4},   {DType::I16, "I16", 2}, {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1},
};

const DTypeEntry& entry(DType dtype) {
  for (const auto& e : kDTypes)
    if (e.dtype == dtype) return e;
  throw Error("internal: unknown dtype");
}

// The header length is stored as 8 bytes little-endian regardless of the host.
uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

template <typename T>
double element_as_double(const unsigned char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return static_cast<double>(value);
}

}  // namespace

std::size_t dtype_size(DType dtype) { return entry(dtype).size; }
const char* dtype_name(DType dtype) { return entry(dtype).name; }

bool parse_dtype(const std::string& name, DType* dtype) {
  for (const auto& e : kDTypes) {
    if (name == e.name) {
      *dtype = e.dtype;
      return true;
    }
  }
  return false;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile SafetensorsFile::load(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw Error("Cannot open model file " + path + ": it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("Cannot open model file " + path + ": no such file or not readable");
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse(std::move(bytes), path);
}

SafetensorsFile SafetensorsFile::parse(std::vector<unsigned char> bytes, const std::string& label) {
  SafetensorsFile file;
  file.path_ = label;
  auto owned = std::make_shared<const std::vector<unsigned char>>(std::move(bytes));
  file.bytes_ = owned;
  const std::vector<unsigned char>& buf = *owned;
  const std::string where = "File " + label + ": ";
  const std::size_t size = buf.size();
  if (size < 8) throw Error(where + "truncated: shorter than the 8-byte header length");
  const uint64_t header_len = read_u64_le(buf.data());
  if (header_len > size - 8)
    throw Error(where + "truncated: header length " + std::to_string(header_len) + " exceeds the " +
                std::to_string(size - 8) + " bytes that follow it");

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(buf.begin() + 8, buf.begin() + 8 + static_cast<std::ptrdiff_t>(header_len));
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + "bad header JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw Error(where + "bad header JSON: not an object");

  const std::size_t data_begin = 8 + header_len;
  const std::size_t data_size = size - data_begin;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& value = it.value();
    if (name == "__metadata__") {
      if (!value.is_object()) throw Error(where + "bad header JSON: __metadata__ is not an object");
      for (auto m = value.begin(); m != value.end(); ++m) {
        if (!m.value().is_string())
          throw Error(where + "bad header JSON: __metadata__ entry '" + m.key() + "' is not a string");
        file.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tw = where + "tensor '" + name + "': ";
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets"))
      throw Error(tw + "bad header JSON: needs dtype, shape and data_offsets");
    TensorView view;
    if (!value["dtype"].is_string() || !parse_dtype(value["dtype"].get<std::string>(), &view.dtype))
      throw Error(tw + "unknown dtype " + value["dtype"].dump());
    if (!value["shape"].is_array()) throw Error(tw + "bad header JSON: shape is not an array");
    for (const auto& d : value["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        throw Error(tw + "bad header JSON: shape entries must be non-negative integers");
      view.shape.push_back(d.get<int64_t>());
    }
    const auto& off = value["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw Error(tw + "bad header JSON: data_offsets must be two non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > data_size)
      throw Error(tw + "data offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                  ") out of range: the data section has " + std::to_string(data_size) +
                  " bytes (file truncated or corrupt)");
    const uint64_t expected = static_cast<uint64_t>(view.numel()) * dtype_size(view.dtype);
    if (e - b != expected)
      throw Error(tw + "holds " + std::to_string(e - b) + " bytes but dtype " + dtype_name(view.dtype) +
                  " and its shape need " + std::to_string(expected));
    view.data = buf.data() + data_begin + b;
    view.nbytes = e - b;
    file.tensors_[name] = view;
  }
  return file;
}

const TensorView& SafetensorsFile::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("File " + path_ + ": missing tensor '" + name + "'");
  return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;
}

std::vector<double> SafetensorsFile::to_doubles(const std::string& name) const {
  const TensorView& t = tensor(name);
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  const std::size_t step = dtype_size(t.dtype);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const unsigned char* p = t.data + i * step;
    switch (t.dtype) {
      case DType::F64:
        out[i] = element_as_double<double>(p);
        break;
      case DType::F32:
        out[i] = element_as_double<float>(p);
        break;
      case DType::I64:
        out[i] = element_as_double<int64_t>(p);
        break;
      case DType::I32:
        out[i] = element_as_double<int32_t>(p);
        break;
      case DType::I16:
        out[i] = element_as_double<int16_t>(p);
        break;
      case DType::I8:
        out[i] = element_as_double<int8_t>(p);
        break;
      case DType::U8:
      case DType::BOOL:
        out[i] = element_as_double<uint8_t>(p);
        break;
      default:
        throw Error("File " + path_ + ": tensor '" + name + "' has dtype " + dtype_name(t.dtype) +
                    ", which cannot be read as numbers here");
    }
  }
  return out;
}

std::vector<unsigned char> serialize_safetensors(const std::map<std::string, std::string>& metadata,
                                                 const std::map<std::string, TensorBytes>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    if (t.bytes.size() != static_cast<std::size_t>(numel) * dtype_size(t.dtype))
      throw Error("Cannot write tensor '" + name + "': byte count does not match its dtype and shape");
    header[name] = {
        {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned
  std::vector<unsigned char> out;
  out.reserve(8 + text.size() + offset);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>((n >> (8 * i)) & 0xff));
  out.insert(out.end(), text.begin(), text.end());
  for (const auto& kv : tensors) out.insert(out.end(), kv.second.bytes.begin(), kv.second.bytes.end());
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const std::map<std::string, TensorBytes>& tensors) {
  const std::vector<unsigned char> bytes = serialize_safetensors(metadata, tensors);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("Cannot write " + path + ": cannot open for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error("Cannot write " + path + ": write failed (disk full?)");
}

}  // namespace flashmace
