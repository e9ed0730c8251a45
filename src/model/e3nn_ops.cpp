#include "model/e3nn_ops.h"

#include <cmath>

namespace flashmace {

at::Tensor normalized_silu(const at::Tensor& x) { return at::silu(x) * kSiluNormalization; }

std::vector<at::Tensor> split_irreps(const at::Tensor& x, const Irreps& irreps) {
  std::vector<at::Tensor> blocks;
  int64_t offset = 0;
  for (const auto& b : irreps.blocks()) {
    blocks.push_back(x.narrow(1, offset, b.dim()).reshape({x.size(0), b.mul, b.ir.dim()}));
    offset += b.dim();
  }
  return blocks;
}

at::Tensor block_matmul(const at::Tensor& x, const at::Tensor& w) {
  const int64_t n = x.size(0), mul = x.size(1), d = x.size(2), mul_out = w.size(1);
  // One GEMM over all n*d rows; matmul on the transposed [n, d, mul] view would run n small batched
  // GEMMs (it cannot fold the batch into rows of a transposed view).
  const at::Tensor rows = d == 1 ? x.reshape({n, mul}) : x.transpose(1, 2).contiguous().view({n * d, mul});
  const at::Tensor y = at::mm(rows, w);
  return d == 1 ? y.view({n, mul_out, 1}) : y.view({n, d, mul_out}).transpose(1, 2);
}

namespace {

at::Tensor join_blocks(const std::vector<at::Tensor>& blocks, int64_t n) {
  std::vector<at::Tensor> flat;
  for (const auto& b : blocks) flat.push_back(b.reshape({n, b.size(1) * b.size(2)}));  // explicit: n may be 0
  return at::cat(flat, 1);
}

}  // namespace

at::Tensor e3nn_linear(const at::Tensor& x, const at::Tensor& weight, const Irreps& in, const Irreps& out) {
  const int64_t n = x.size(0);
  const auto xs = split_irreps(x, in);
  std::vector<at::Tensor> ys;
  int64_t offset = 0;
  std::vector<at::Tensor> acc(out.size());
  std::vector<int> fan(out.size(), 0);
  for (std::size_t i = 0; i < in.size(); ++i)
    for (std::size_t o = 0; o < out.size(); ++o)
      if (in[i].ir == out[o].ir) fan[o] += in[i].mul;
  for (std::size_t i = 0; i < in.size(); ++i) {
    for (std::size_t o = 0; o < out.size(); ++o) {
      if (in[i].ir != out[o].ir) continue;
      const int64_t numel = static_cast<int64_t>(in[i].mul) * out[o].mul;
      const at::Tensor w = weight.narrow(0, offset, numel).reshape({in[i].mul, out[o].mul});
      offset += numel;
      // [N, mul_in, d] -> [N, d, mul_in] @ [mul_in, mul_out] -> [N, mul_out, d]
      at::Tensor y = block_matmul(xs[i], w) / std::sqrt(static_cast<double>(fan[o]));
      acc[o] = acc[o].defined() ? acc[o] + y : y;
    }
  }
  for (std::size_t o = 0; o < out.size(); ++o)
    ys.push_back(acc[o].defined() ? acc[o] : at::zeros({n, out[o].mul, out[o].ir.dim()}, x.options()));
  return join_blocks(ys, n);
}

// The x-gradient of y = e3nn_linear(x, weight, in, out) for the y-gradient g (the transpose of the
// same block matrices; weight offsets in e3nn_linear's order: input blocks outer, output inner).
at::Tensor e3nn_linear_transpose(const at::Tensor& g, const at::Tensor& weight, const Irreps& in, const Irreps& out) {
  const int64_t n = g.size(0);
  const auto gs = split_irreps(g, out);
  std::vector<int> fan(out.size(), 0);
  for (std::size_t i = 0; i < in.size(); ++i)
    for (std::size_t o = 0; o < out.size(); ++o)
      if (in[i].ir == out[o].ir) fan[o] += in[i].mul;
  std::vector<at::Tensor> blocks;
  int64_t offset = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    at::Tensor acc = at::zeros({n, in[i].mul, in[i].ir.dim()}, g.options());
    for (std::size_t o = 0; o < out.size(); ++o) {
      if (in[i].ir != out[o].ir) continue;
      const int64_t numel = static_cast<int64_t>(in[i].mul) * out[o].mul;
      const at::Tensor w = weight.narrow(0, offset, numel).reshape({in[i].mul, out[o].mul});
      offset += numel;
      // [N, mul_out, d] -> [N, d, mul_out] @ [mul_out, mul_in] -> [N, mul_in, d]
      acc.add_(block_matmul(gs[o], w.t()), 1.0 / std::sqrt(static_cast<double>(fan[o])));
    }
    blocks.push_back(acc.reshape({n, acc.size(1) * acc.size(2)}));
  }
  return at::cat(blocks, 1);
}

at::Tensor element_linear(const at::Tensor& x, const at::Tensor& species, const at::Tensor& weight, const Irreps& in,
                          int num_elements, const Irreps& out) {
  const int64_t n = x.size(0);
  const auto xs = split_irreps(x, in);
  std::vector<int> fan(out.size(), 0);
  for (std::size_t i = 0; i < in.size(); ++i)
    for (std::size_t o = 0; o < out.size(); ++o)
      if (in[i].ir == out[o].ir) fan[o] += in[i].mul * num_elements;
  std::vector<at::Tensor> acc(out.size());
  int64_t offset = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    for (std::size_t o = 0; o < out.size(); ++o) {
      if (in[i].ir != out[o].ir) continue;
      const int64_t numel = static_cast<int64_t>(in[i].mul) * num_elements * out[o].mul;
      // [mul_in, Z, mul_out] -> per node [N, mul_out, mul_in] gathered by element
      const at::Tensor w = weight.narrow(0, offset, numel).reshape({in[i].mul, num_elements, out[o].mul});
      offset += numel;
      const at::Tensor wn = w.index_select(1, species).permute({1, 2, 0});
      at::Tensor y = at::bmm(wn, xs[i]) / std::sqrt(static_cast<double>(fan[o]));
      acc[o] = acc[o].defined() ? acc[o] + y : y;
    }
  }
  std::vector<at::Tensor> ys;
  for (std::size_t o = 0; o < out.size(); ++o)
    ys.push_back(acc[o].defined() ? acc[o] : at::zeros({n, out[o].mul, out[o].ir.dim()}, x.options()));
  return join_blocks(ys, n);
}

at::Tensor element_linear_transpose(const at::Tensor& g, const at::Tensor& species, const at::Tensor& weight,
                                    const Irreps& in, int num_elements, const Irreps& out) {
  const int64_t n = g.size(0);
  const auto gs = split_irreps(g, out);
  std::vector<int> fan(out.size(), 0);
  for (std::size_t i = 0; i < in.size(); ++i)
    for (std::size_t o = 0; o < out.size(); ++o)
      if (in[i].ir == out[o].ir) fan[o] += in[i].mul * num_elements;
  std::vector<at::Tensor> blocks;
  int64_t offset = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    at::Tensor acc = at::zeros({n, in[i].mul, in[i].ir.dim()}, g.options());
    for (std::size_t o = 0; o < out.size(); ++o) {
      if (in[i].ir != out[o].ir) continue;
      const int64_t numel = static_cast<int64_t>(in[i].mul) * num_elements * out[o].mul;
      const at::Tensor w = weight.narrow(0, offset, numel).reshape({in[i].mul, num_elements, out[o].mul});
      offset += numel;
      // per node [mul_in, mul_out] @ [mul_out, d] -> [mul_in, d]
      const at::Tensor wn = w.index_select(1, species).permute({1, 0, 2});
      acc.add_(at::bmm(wn, gs[o]), 1.0 / std::sqrt(static_cast<double>(fan[o])));
    }
    blocks.push_back(acc.reshape({n, acc.size(1) * acc.size(2)}));
  }
  return at::cat(blocks, 1);
}

at::Tensor conv_tensor_product(const at::Tensor& x1, const at::Tensor& sh, const at::Tensor& weights, const Irreps& in1,
                               const Irreps& sh_irreps, const ConvTPLayout& layout,
                               const std::vector<at::Tensor>& w3j) {
  const int64_t e = x1.size(0);
  const auto xs = split_irreps(x1, in1);
  const auto ys = split_irreps(sh, sh_irreps);
  std::vector<at::Tensor> outs(layout.mid.size());
  int64_t offset = 0;
  for (std::size_t p = 0; p < layout.paths.size(); ++p) {
    const ConvTPPath& path = layout.paths[p];
    const int mul = in1[path.i1].mul;
    const int l3 = layout.mid[path.k].ir.l;
    const at::Tensor w = weights.narrow(1, offset, mul).unsqueeze(-1);  // [E, mul, 1]
    offset += mul;
    // sum_{m2} C[m1,m2,m3] Y[e,m2] -> [E, d1, d3]; then x1 [E, mul, d1] @ that -> [E, mul, d3]
    const at::Tensor cy = at::einsum("ijk,ej->eik", {w3j[p], ys[path.i2].select(1, 0)});
    const double alpha = std::sqrt(2.0 * l3 + 1.0);  // mace_spec.md 5.2: fan = 1 per output block
    outs[path.k] = alpha * w * at::bmm(xs[path.i1], cy);
  }
  std::vector<at::Tensor> flat;
  for (const auto& o : outs) flat.push_back(o.reshape({e, o.size(1) * o.size(2)}));  // explicit: e may be 0
  return at::cat(flat, 1);
}

at::Tensor radial_mlp(const at::Tensor& x, const std::vector<at::Tensor>& layers) {
  at::Tensor h = x;
  for (std::size_t k = 0; k < layers.size(); ++k) {
    h = at::matmul(h, layers[k]) / std::sqrt(static_cast<double>(layers[k].size(0)));
    if (k + 1 < layers.size()) h = normalized_silu(h);
  }
  return h;
}

at::Tensor gate(const at::Tensor& x, const Irreps& out) {
  const int64_t n = x.size(0);
  int64_t scalars = 0, gates = 0;
  for (const auto& b : out.blocks()) (b.ir.l == 0 ? scalars : gates) += b.mul;
  std::vector<at::Tensor> blocks = {normalized_silu(x.narrow(1, 0, scalars)).reshape({n, scalars, 1})};
  int64_t gate_offset = scalars, offset = scalars + gates;
  for (const auto& b : out.blocks()) {
    if (b.ir.l == 0) continue;
    const at::Tensor g = kSigmoidNormalization * at::sigmoid(x.narrow(1, gate_offset, b.mul));
    blocks.push_back(x.narrow(1, offset, b.dim()).reshape({n, b.mul, b.ir.dim()}) * g.unsqueeze(2));
    gate_offset += b.mul;
    offset += b.dim();
  }
  return join_blocks(blocks, n);
}

}  // namespace flashmace
