#include "engine/species_linear.h"

#include <cmath>

#include "model/e3nn_ops.h"

namespace flashmace {

std::vector<int64_t> elements_present(const at::Tensor& species) {
  const at::Tensor u = std::get<0>(at::_unique2(species, /*sorted=*/true, false, false)).to(at::kCPU).contiguous();
  return std::vector<int64_t>(u.data_ptr<int64_t>(), u.data_ptr<int64_t>() + u.numel());
}

SpeciesGroups group_species(const at::Tensor& species, const std::vector<int64_t>& present) {
  SpeciesGroups g;
  if (present.size() <= 1) {
    g.elements = present;
    return g;
  }
  for (int64_t s : present) {
    at::Tensor rows = at::nonzero(species == s).squeeze(1);
    if (rows.size(0) == 0) continue;
    g.elements.push_back(s);
    g.rows.push_back(rows);
  }
  return g;
}

namespace {

// Shared by both directions: for every (in block i, out block o) pair of equal irreps, the element's
// [mul_in, mul_out] matrix (transposed for the x-gradient) applied to the rows of that element.
at::Tensor apply(const at::Tensor& x, const SpeciesGroups& groups, const at::Tensor& weight, const Irreps& in,
                 int num_elements, const Irreps& out, bool transpose) {
  const Irreps& src = transpose ? out : in;
  const Irreps& dst = transpose ? in : out;
  const int64_t n = x.size(0);
  const auto xs = split_irreps(x, src);
  std::vector<int> fan(out.size(), 0);
  for (std::size_t i = 0; i < in.size(); ++i)
    for (std::size_t o = 0; o < out.size(); ++o)
      if (in[i].ir == out[o].ir) fan[o] += in[i].mul * num_elements;
  std::vector<at::Tensor> acc(dst.size());
  for (std::size_t k = 0; k < dst.size(); ++k) acc[k] = at::zeros({n, dst[k].mul, dst[k].ir.dim()}, x.options());
  int64_t offset = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    for (std::size_t o = 0; o < out.size(); ++o) {
      if (in[i].ir != out[o].ir) continue;
      const int64_t numel = static_cast<int64_t>(in[i].mul) * num_elements * out[o].mul;
      const at::Tensor w = weight.narrow(0, offset, numel).reshape({in[i].mul, num_elements, out[o].mul});
      offset += numel;
      const double norm = 1.0 / std::sqrt(static_cast<double>(fan[o]));
      const std::size_t s_blk = transpose ? o : i, d_blk = transpose ? i : o;
      for (std::size_t k = 0; k < groups.elements.size(); ++k) {
        at::Tensor ws = w.select(1, groups.elements[k]);  // [mul_in, mul_out]
        if (transpose) ws = ws.t();
        const bool all = groups.rows.empty();
        const at::Tensor xr = all ? xs[s_blk] : xs[s_blk].index_select(0, groups.rows[k]);
        const at::Tensor y = block_matmul(xr, ws);  // [r, mul_src, d] -> [r, mul_dst, d]
        if (all)
          acc[d_blk].add_(y, norm);
        else
          acc[d_blk].index_add_(0, groups.rows[k], y * norm);  // distinct rows: no atomics race
      }
    }
  }
  std::vector<at::Tensor> flat;
  for (const auto& a : acc) flat.push_back(a.reshape({n, a.size(1) * a.size(2)}));
  return at::cat(flat, 1);
}

}  // namespace

at::Tensor species_linear(const at::Tensor& x, const SpeciesGroups& groups, const at::Tensor& weight, const Irreps& in,
                          int num_elements, const Irreps& out) {
  return apply(x, groups, weight, in, num_elements, out, false);
}

at::Tensor species_linear_transpose(const at::Tensor& g, const SpeciesGroups& groups, const at::Tensor& weight,
                                    const Irreps& in, int num_elements, const Irreps& out) {
  return apply(g, groups, weight, in, num_elements, out, true);
}

}  // namespace flashmace
