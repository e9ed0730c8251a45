#pragma once
// The one exception type of flashmace. Messages name the object at fault (file, tensor, atom,
// element) and, where there is one, the fix; adapters (CLI, pair style) print them unchanged.
#include <stdexcept>
#include <string>

namespace flashmace {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace flashmace
