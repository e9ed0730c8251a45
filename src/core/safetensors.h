#pragma once
// Reader and writer for the safetensors container: 8-byte little-endian header length, a JSON
// header (tensor name -> dtype, shape, byte offsets; optional "__metadata__" string map), then
// the raw little-endian tensor bytes. The file is read once into memory; tensors are views.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace flashmace {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // safetensors spelling: "F64", "I32", ...
bool parse_dtype(const std::string& name, DType* dtype);

struct TensorView {
  DType dtype = DType::F64;
  std::vector<int64_t> shape;
  const unsigned char* data = nullptr;
  std::size_t nbytes = 0;
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Throws flashmace::Error naming the file and what is wrong with it.
  static SafetensorsFile load(const std::string& path);
  static SafetensorsFile parse(std::vector<unsigned char> bytes, const std::string& label);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorView& tensor(const std::string& name) const;  // throws if absent
  std::vector<std::string> names() const;

  // Copies a tensor of any floating or integer dtype into doubles (for small buffers).
  std::vector<double> to_doubles(const std::string& name) const;

 private:
  std::string path_;
  // Shared so that copies of the file keep their views valid.
  std::shared_ptr<const std::vector<unsigned char>> bytes_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, TensorView> tensors_;
};

// A tensor to write: the bytes are little-endian and exactly numel * dtype_size long.
struct TensorBytes {
  DType dtype = DType::F64;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

std::vector<unsigned char> serialize_safetensors(const std::map<std::string, std::string>& metadata,
                                                 const std::map<std::string, TensorBytes>& tensors);
void write_safetensors(const std::string& path, const std::map<std::string, std::string>& metadata,
                       const std::map<std::string, TensorBytes>& tensors);

}  // namespace flashmace
