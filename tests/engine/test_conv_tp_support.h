#pragma once
// A conv TP problem (irreps, edges sorted by receiver, random inputs) and its reference result:
// conv_tensor_product on gathered features, index_add over receivers, autograd for the gradients.
// Shared by the conv TP tests and benchmark. Also the checks of the fused kernels
// (engine/ops/conv_tp_op.h) against it, shared by the CPU and CUDA tests (engine/test_conv_tp.cpp,
// gpu/test_gpu_conv_tp.cpp): they report through gtest's EXPECTs.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/irreps.h"

namespace flashmace::testing {

struct ConvTPProblem {
  Irreps in1, sh;
  ConvTPLayout layout;
  int64_t nrows = 0, num_x = 0;
  at::Tensor x, xindex, Y, R;  // x [num_x, dim(in1)], xindex [E], Y [E, dim(sh)], R [E, weight_numel]
  at::Tensor receiver, row_ptr;  // [E] sorted, [nrows + 1]
  at::Tensor dagg;               // [nrows, dim(mid)] upstream gradient
};

// Edges of row r: counts[r]; xindex uniform in [0, num_x); values from `seed`, float64 on the CPU.
ConvTPProblem make_conv_tp_problem(const Irreps& in1, const Irreps& sh, const ConvTPLayout& layout,
                                   const std::vector<int64_t>& counts, int64_t num_x, uint64_t seed);

// The same problem in another dtype / on another device.
ConvTPProblem convert(const ConvTPProblem& p, const at::TensorOptions& options);

struct ConvTPReference {
  at::Tensor agg, dR, dY, dx;
};
ConvTPReference conv_tp_reference(const ConvTPProblem& p);

struct Results {
  at::Tensor agg, dR, dY, dx;
};

// The kernels on p (its dtype and device); dx accumulated onto a non-zero start and returned minus it.
// specialize: on CUDA, the generated kernels (required to be available) instead of the table-driven ones.
// radial_index: p.R holds shared rows, edge e uses row radial_index[e].
// dR_by_row: dR summed per radial row (at most two edges per row).
// ir_mul: the generated kernels of the ir_mul descriptor, given x and dagg in ir_mul; agg and dx are
// returned in mul_ir.
Results run_kernels(const ConvTPProblem& p, bool specialize = false, const at::Tensor& radial_index = {},
                    bool dR_by_row = false, bool ir_mul = false);

// Checks every receiver-segment pattern (rows with no, one and many edges), x by sender (many rows)
// and by species (3 rows), float64 and float32, against the reference path; prints the worst
// relative error per tolerance.
void check_layout(const Irreps& in1, const Irreps& sh, const ConvTPLayout& layout, const at::Device& device,
                  uint64_t seed, const std::string& name, bool specialize = false, bool ir_mul = false);

// check_layout for every layer of the shared reference models (scalar_l0, small_l1, large_l2).
void check_reference_models(const at::Device& device);

// check_layout for random irreps with l <= 3, random multiplicities (so paths differ in mul) and parities.
void check_random_layouts(const at::Device& device);

// Edges sharing radial rows through an index give exactly the results of each edge holding a copy
// of its row (the kernels read the same numbers): the radial-MLP pairing of the fast engine; with
// pairs, dR can also come summed per row.
void check_radial_index(const at::Device& device, bool specialize);

// The CPU backward cuts the receiver rows into one part per thread, each summing its dx in its own
// window of x rows (senders near their receivers, as along a space-filling curve) or, with windows
// too large (senders anywhere), per x row over its edges: with 1, 2 and 3 threads, both ways, the
// reference path's numbers in float64 and float32, and the same bits on a repeated run.
void check_thread_counts();

// Layouts the code generator specialises (every path of one multiplicity, a multiple of 32): MACE's
// first and later layers, padded harmonics (9 -> 16), several warps per row, odd-parity inputs.
struct NamedLayout {
  std::string name;
  Irreps in1, sh;
  ConvTPLayout layout;
};
std::vector<NamedLayout> specializable_layouts();

}  // namespace flashmace::testing
