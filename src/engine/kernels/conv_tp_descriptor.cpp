#include "engine/kernels/conv_tp_descriptor.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/wigner3j.h"

namespace flashmace {

namespace {

// Entries of the real-basis Wigner-3j that are exact zeros come out of the basis change as round-off
// of order 1e-17; everything that is structurally non-zero is larger than 1e-3.
constexpr double kZeroCoefficient = 1e-15;

}  // namespace

ConvTPDescriptor ConvTPDescriptor::build(const Irreps& in1, const Irreps& sh, const ConvTPLayout& layout,
                                         bool ir_mul) {
  ConvTPDescriptor d;
  d.ir_mul = ir_mul;
  d.dim_in1 = in1.dim();
  d.dim_sh = sh.dim();
  d.dim_mid = layout.mid.dim();
  std::vector<int> paths_into(layout.mid.size(), 0);
  int w_offset = 0;
  for (const ConvTPPath& path : layout.paths) {
    const MulIr& a = in1[path.i1];
    const MulIr& b = sh[path.i2];
    const MulIr& c = layout.mid[path.k];
    if (b.mul != 1)
      throw Error("conv TP descriptor: spherical-harmonics block " + std::to_string(path.i2) + " of '" + sh.str() +
                  "' has multiplicity " + std::to_string(b.mul) + "; the uvu product needs 1");
    if (c.mul != a.mul)
      throw Error("conv TP descriptor: mid block " + std::to_string(path.k) + " of '" + layout.mid.str() +
                  "' has multiplicity " + std::to_string(c.mul) + " but input block '" + std::to_string(a.mul) + "x" +
                  a.ir.str() + "' feeds it; the layout was not built from these irreps");
    ++paths_into[path.k];
    ConvTPPathDescriptor p;
    p.x_offset = in1.offset(path.i1);
    p.y_offset = sh.offset(path.i2);
    p.mid_offset = layout.mid.offset(path.k);
    p.w_offset = w_offset;
    p.mul = a.mul;
    p.d1 = a.ir.dim();
    p.d2 = b.ir.dim();
    p.d3 = c.ir.dim();
    p.alpha = std::sqrt(2.0 * c.ir.l + 1.0);
    p.x_place = ir_mul_place(in1, static_cast<std::size_t>(path.i1));
    p.mid_place = ir_mul_place(layout.mid, static_cast<std::size_t>(path.k));
    p.entry_begin = static_cast<int>(d.entries.size());
    const std::vector<double>& w3j = wigner_3j(a.ir.l, b.ir.l, c.ir.l);
    for (int m1 = 0; m1 < p.d1; ++m1)
      for (int m2 = 0; m2 < p.d2; ++m2)
        for (int m3 = 0; m3 < p.d3; ++m3) {
          const double v = w3j[(m1 * p.d2 + m2) * p.d3 + m3];
          if (std::abs(v) >= kZeroCoefficient) d.entries.push_back({m1, m2, m3, v});
        }
    p.entry_end = static_cast<int>(d.entries.size());
    w_offset += a.mul;
    d.max_mul = std::max(d.max_mul, a.mul);
    d.paths.push_back(p);
  }
  for (std::size_t k = 0; k < paths_into.size(); ++k)
    if (paths_into[k] != 1)
      throw Error("conv TP descriptor: mid block " + std::to_string(k) + " of '" + layout.mid.str() + "' is produced by " +
                  std::to_string(paths_into[k]) + " paths; MACE's layout has exactly one per block");
  d.weight_numel = w_offset;
  if (d.weight_numel != layout.weight_numel)
    throw Error("conv TP descriptor: the layout's weight_numel " + std::to_string(layout.weight_numel) +
                " differs from the sum of path multiplicities " + std::to_string(d.weight_numel));
  return d;
}

}  // namespace flashmace
