// Packs a ConvTPDescriptor into the kernels' tables: each path's Wigner-3j terms in three orders
// (by m3, m2, m1), grouped into runs that share the output component, alpha folded in.
#include <algorithm>
#include <array>

#include "engine/kernels/conv_tp_kernels.h"

namespace flashmace {

ConvTPPacked pack_conv_tp(const ConvTPDescriptor& d) {
  ConvTPPacked k;
  k.dim_in1 = d.dim_in1;
  k.dim_sh = d.dim_sh;
  k.dim_mid = d.dim_mid;
  k.weight_numel = d.weight_numel;
  k.max_mul = d.max_mul;
  for (const ConvTPPathDescriptor& p : d.paths) {
    ConvTPKernelPath kp{};
    kp.x_offset = p.x_offset;
    kp.y_offset = p.y_offset;
    kp.mid_offset = p.mid_offset;
    kp.w_offset = p.w_offset;
    kp.mul = p.mul;
    kp.d1 = p.d1;
    kp.d2 = p.d2;
    kp.d3 = p.d3;
    const std::vector<ConvTPW3jEntry> entries(d.entries.begin() + p.entry_begin, d.entries.begin() + p.entry_end);
    for (int order : {kConvTPByM3, kConvTPByM2, kConvTPByM1}) {
      // (out, a, b) of an entry in this order.
      const auto roles = [order](const ConvTPW3jEntry& e) -> std::array<int, 3> {
        if (order == kConvTPByM3) return {e.m3, e.m1, e.m2};
        if (order == kConvTPByM2) return {e.m2, e.m1, e.m3};
        return {e.m1, e.m2, e.m3};
      };
      std::vector<ConvTPW3jEntry> sorted = entries;
      std::stable_sort(sorted.begin(), sorted.end(),
                       [&](const ConvTPW3jEntry& x, const ConvTPW3jEntry& y) { return roles(x)[0] < roles(y)[0]; });
      kp.run_begin[order] = static_cast<int32_t>(k.runs.size());
      for (const ConvTPW3jEntry& e : sorted) {
        const std::array<int, 3> r = roles(e);
        if (k.runs.size() == static_cast<std::size_t>(kp.run_begin[order]) || k.runs.back().out != r[0])
          k.runs.push_back({r[0], static_cast<int32_t>(k.terms.size()), static_cast<int32_t>(k.terms.size())});
        k.terms.push_back({r[1], r[2]});
        k.coeff.push_back(p.alpha * e.c);
        k.runs.back().term_end = static_cast<int32_t>(k.terms.size());
      }
      kp.run_end[order] = static_cast<int32_t>(k.runs.size());
    }
    k.paths.push_back(kp);
  }
  return k;
}

}  // namespace flashmace
