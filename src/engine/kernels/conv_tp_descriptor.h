#pragma once
// What MACE's channelwise ("uvu") conv tensor product computes, as flat numbers (mace_spec.md 5.2):
// for each path p = (i1, i2, k) of a ConvTPLayout,
//   out[e, mid_offset + u*d3 + m3] = alpha * R[e, w_offset + u] * sum C[m1,m2,m3] x[e, x_offset + u*d1 + m1] Y[e, y_offset + m2]
// with the non-zero Wigner-3j entries C listed per path. Torch-free and device-free: the executors
// (conv_tp_kernels.h) pack it into their own tables.
#include <vector>

#include "core/irreps.h"

namespace flashmace {

struct ConvTPW3jEntry {
  int m1 = 0, m2 = 0, m3 = 0;
  double c = 0;  // e3nn's real Wigner-3j, without alpha
};

struct ConvTPPathDescriptor {
  int x_offset = 0;    // column of block i1 in in1
  int y_offset = 0;    // column of block i2 in the spherical harmonics
  int mid_offset = 0;  // column of block k in the mid irreps
  int w_offset = 0;    // first of this path's `mul` radial weights
  int mul = 0;
  int d1 = 0, d2 = 0, d3 = 0;  // 2l+1 of the three irreps
  double alpha = 1;            // mace_spec.md 5.2: sqrt(2 l3 + 1), one path per output block
  int entry_begin = 0, entry_end = 0;  // this path's range of ConvTPDescriptor::entries
  IrMulPlace x_place, mid_place;       // blocks i1 and k in ir_mul (core/irreps.h), for ir_mul descriptors
};

struct ConvTPDescriptor {
  int dim_in1 = 0, dim_sh = 0, dim_mid = 0, weight_numel = 0;
  int max_mul = 0;  // largest path multiplicity (the channel extent of the kernels)
  // x (and its gradient) and the message sums (and theirs) in ir_mul instead of mul_ir: component m
  // of channel u at x_place / mid_place's run offset + m * run mul + channel offset + u. Only the
  // generated CUDA kernels (conv_tp_codegen.h) read and write it.
  bool ir_mul = false;
  std::vector<ConvTPPathDescriptor> paths;
  std::vector<ConvTPW3jEntry> entries;

  // Throws flashmace::Error if the layout does not belong to (in1, sh): a spherical-harmonics block
  // of multiplicity other than 1, or a mid block not produced by exactly one path.
  static ConvTPDescriptor build(const Irreps& in1, const Irreps& sh, const ConvTPLayout& layout, bool ir_mul = false);
};

}  // namespace flashmace
