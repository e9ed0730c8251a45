#pragma once
// Specialised conv TP kernels for one model layer, generated as CUDA source for NVRTC (the way
// sc_codegen.h does it for the symmetric contraction): the descriptor's paths and Wigner-3j terms
// become straight-line code with literal coefficients, every value of one (edge, channel) lives in
// registers, and the loops left are over edges. Same math as conv_tp_kernels.h, in its layouts or,
// for ir_mul descriptors, with x, dx, agg and dagg in ir_mul (conv_tp_descriptor.h).
//
// Kernels (suffix _f32 / _f64), blocks of
// kConvTPSpecializedThreads threads, edges of a row visited in order (no atomics, deterministic):
//   tp_forward  (x, xindex, Y, R, rindex, row_ptr, agg, part, nrows, splits): thread per (row, split,
//               path group, channel); the groups (conv_tp_forward_groups) each sum some of the
//               paths, so that a thread's sums fit in fewer registers
//   tp_backward (x, xindex, Y, R, rindex, row_ptr, dagg, dR, dYp, dxe, nrows, splits): thread per
//               (row, split, channel), a row's edges dealt round-robin to its `splits` warps
//               (more threads for small systems); dR [E, weight_numel];
//               dYp [E, dy_parts, dy_padded]: each warp's partial dY (its 32 channels, reduced by
//               register shuffles); dxe [E, dim_in1] each edge's x-gradient (skipped when null)
//   tp_dy_reduce (dYp, dY, E): dY [E, dim_sh] = sum over the parts
//   tp_dx_gather (dxe, x_perm, x_ptr, x_rows, dx, num_rows): dx[x_rows[r] or r] += sum of dxe over CSR
//                row r's edges, in x_perm order
// rindex (may be null): each edge's row of R (conv_tp_kernels.h radial_index).
// Sums over a row's edges (forward: in T over blocks of 8 edges, the blocks in double) and a node's
// edges (dx) accumulate in double for both dtypes.
#include <string>

#include "engine/kernels/conv_tp_descriptor.h"

namespace flashmace {

constexpr int kConvTPSpecializedThreads = 128;

// "" when the generator handles the descriptor, else why not (the generic kernels then run).
std::string conv_tp_specialization_unsupported(const ConvTPDescriptor& d);

int conv_tp_dy_parts(const ConvTPDescriptor& d);   // warps per row: max_mul / 32
int conv_tp_dy_padded(const ConvTPDescriptor& d);  // dim_sh rounded up to a power of two
// Thread groups per (row, split, channel) of the forward kernel, each summing some of the paths.
int conv_tp_forward_groups(const ConvTPDescriptor& d);

// Same descriptor -> same bytes (the NVRTC cache key).
std::string generate_conv_tp_cuda_source(const ConvTPDescriptor& d);

}  // namespace flashmace
