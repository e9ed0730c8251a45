#pragma once
// Helpers shared by the linear tests on the CPU (engine/test_irreps_linear.cpp) and on CUDA
// (gpu/test_gpu_irreps_linear.cpp): float64 options, the largest difference of two tensors, the
// weight count of an irreps pair, and the irreps of a parameterised case.
#include <ATen/ATen.h>

#include <cstdint>
#include <limits>

#include "core/irreps.h"

namespace flashmace::testing {

inline const auto kF64 = at::TensorOptions().dtype(at::kDouble);

// Largest |a - b|, infinite when either holds a non-finite value.
inline double max_abs(const at::Tensor& a, const at::Tensor& b) {
  if (!at::isfinite(a).all().item<bool>() || !at::isfinite(b).all().item<bool>())
    return std::numeric_limits<double>::infinity();
  return (a - b).abs().max().item<double>();
}

inline int64_t weight_count(const Irreps& in, const Irreps& out, int64_t factor = 1) {
  int64_t n = 0;
  for (const auto& i : in.blocks())
    for (const auto& o : out.blocks())
      if (i.ir == o.ir) n += static_cast<int64_t>(i.mul) * o.mul * factor;
  return n;
}

struct Case {
  const char* in;
  const char* out;
};

}  // namespace flashmace::testing
