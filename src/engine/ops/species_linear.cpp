#include "engine/ops/species_linear.h"

#include <algorithm>

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
  std::vector<at::Tensor> rows;
  for (int64_t s : present) {
    at::Tensor r = at::nonzero(species == s).squeeze(1);
    if (r.size(0) == 0) continue;
    g.elements.push_back(s);
    g.counts.push_back(r.size(0));
    rows.push_back(r);
  }
  if (g.elements.size() <= 1) {
    g.counts.clear();  // (one element present in this block: all rows, no gather)
    return g;
  }
  const int64_t batch = *std::max_element(g.counts.begin(), g.counts.end());
  const auto i64 = species.options().dtype(at::kLong);
  std::vector<at::Tensor> batches, places;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    batches.push_back(at::cat({rows[k], rows[k].narrow(0, 0, 1).expand({batch - g.counts[k]})}));
    places.push_back(at::arange(static_cast<int64_t>(k) * batch, static_cast<int64_t>(k) * batch + g.counts[k], i64));
  }
  g.batched_rows = at::cat(batches);
  // place[row] = its position in batched_rows
  g.place = at::empty({species.size(0)}, i64).index_copy_(0, at::cat(rows), at::cat(places));
  g.element_index = at::tensor(g.elements, at::kLong).to(species.device());
  return g;
}

SpeciesLinear::SpeciesLinear(const at::Tensor& weight, const Irreps& in, int num_elements, const Irreps& out) {
  // The weights are [mul_in, Z, mul_out] per (in block, out block) pair of equal irreps (e3nn's
  // order): element z's part, flattened in the same order, is an o3.Linear's weight vector whose
  // fans count Z times the input multiplicities.
  for (int z = 0; z < num_elements; ++z) {
    std::vector<at::Tensor> parts;
    int64_t offset = 0;
    for (std::size_t i = 0; i < in.size(); ++i)
      for (std::size_t o = 0; o < out.size(); ++o) {
        if (in[i].ir != out[o].ir) continue;
        const int64_t numel = static_cast<int64_t>(in[i].mul) * num_elements * out[o].mul;
        parts.push_back(
            weight.narrow(0, offset, numel).reshape({in[i].mul, num_elements, out[o].mul}).select(1, z).reshape(-1));
        offset += numel;
      }
    const at::Tensor flat = parts.empty() ? at::empty({0}, weight.options()) : at::cat(parts);
    per_element_.emplace_back(flat, in, out, num_elements);
  }
  stacked_ = IrrepsLinear::stack(per_element_);
}

SpeciesLinear& SpeciesLinear::set_layouts(IrrepsLayout in, IrrepsLayout out) {
  for (IrrepsLinear& f : per_element_) f.set_layouts(in, out);
  stacked_.set_layouts(in, out);
  return *this;
}

at::Tensor SpeciesLinear::apply(const at::Tensor& x, const SpeciesGroups& groups, bool transpose,
                                const at::Tensor& add_to) const {
  auto run = [&](const IrrepsLinear& f, const at::Tensor& rows, const at::Tensor& into, bool accumulate) {
    if (transpose)
      f.transpose_into(rows, into, accumulate);
    else
      f.forward_into(rows, into, accumulate);
  };
  const IrrepsLinear& any = per_element_.front();
  const int64_t width = transpose ? any.in_dim() : any.out_dim();
  at::Tensor y = add_to.defined() ? add_to : at::empty({x.size(0), width}, x.options());
  if (groups.elements.empty()) {  // no atoms
    if (!add_to.defined()) y.zero_();
    return y;
  }
  if (!groups.batched_rows.defined()) {  // one element: all rows
    run(per_element_[static_cast<std::size_t>(groups.elements.front())], x, y, add_to.defined());
    return y;
  }
  // Several elements: the padded element batches through the stacked weights of the elements
  // present, then each row read back from its place (every row written once, padding dropped).
  const at::Tensor xs = x.index_select(0, groups.batched_rows);
  const at::Tensor ys = at::empty({xs.size(0), width}, x.options());
  run(stacked_.select(groups.element_index), xs, ys, false);
  if (add_to.defined())
    y.add_(ys.index_select(0, groups.place));
  else
    at::index_select_out(y, ys, 0, groups.place);
  return y;
}

at::Tensor SpeciesLinear::forward(const at::Tensor& x, const SpeciesGroups& groups) const {
  return apply(x, groups, false, {});
}

at::Tensor SpeciesLinear::transpose(const at::Tensor& g, const SpeciesGroups& groups) const {
  return apply(g, groups, true, {});
}

void SpeciesLinear::forward_add(const at::Tensor& x, const SpeciesGroups& groups, const at::Tensor& y) const {
  apply(x, groups, false, y);
}

}  // namespace flashmace
