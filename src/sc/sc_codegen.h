#pragma once
// CUDA C++ source for one layer's SC with the descriptor's structure and coefficients as literals
// (the load-time specialisation of DESIGN.md idea 1). Knows nothing about NVRTC or the driver.
//
// The source defines four extern "C" kernels, one thread per (atom, channel):
//   sc_forward_f32 / sc_forward_f64   (const T* A, const long long* species, const T* W, T* B, long long n)
//   sc_backward_f32 / sc_backward_f64 (const T* A, const long long* species, const T* W, const T* dB,
//                                      T* dA, long long n)
// with A, B, dB, dA laid out as for ScCpuExecutor and W = pack_sc_weights(d): every block's weight
// table side by side, [Z, sum over blocks of total_paths, C]. An element index outside [0, Z) makes
// the atom's outputs NaN.
#include <string>
#include <vector>

#include "sc/sc_descriptor.h"

namespace flashmace {

constexpr int kScThreadsPerBlock = 128;  // launch configuration the generated kernels are bounded for

std::string generate_sc_cuda_source(const ScDescriptor& d);  // same descriptor -> same bytes

// A double as a literal of the kernels' scalar type T: "T(<shortest round-trip digits>)". Shared with
// the conv TP generator (engine/kernels/conv_tp_codegen.h).
std::string cuda_literal(double v);

int packed_weight_paths(const ScDescriptor& d);  // sum over blocks of total_paths
template <typename T>
std::vector<T> pack_sc_weights(const ScDescriptor& d);  // [Z, packed_weight_paths, C]

}  // namespace flashmace
