#include "engine/test_conv_tp_support.h"

#include <torch/csrc/autograd/autograd.h>

#include "core/wigner3j.h"
#include "model/e3nn_ops.h"

namespace flashmace::testing {

ConvTPProblem make_conv_tp_problem(const Irreps& in1, const Irreps& sh, const ConvTPLayout& layout,
                                   const std::vector<int64_t>& counts, int64_t num_x, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  const at::TensorOptions i64 = at::TensorOptions().dtype(at::kLong);
  ConvTPProblem p;
  p.in1 = in1;
  p.sh = sh;
  p.layout = layout;
  p.nrows = static_cast<int64_t>(counts.size());
  p.num_x = num_x;
  const at::Tensor c = at::tensor(counts, i64);
  p.receiver = at::repeat_interleave(at::arange(p.nrows, i64), c);
  p.row_ptr = at::cat({at::zeros({1}, i64), at::cumsum(c, 0)});
  const int64_t E = p.receiver.size(0);
  p.x = at::randn({num_x, in1.dim()}, gen, f64);
  p.xindex = at::randint(num_x, {E}, gen, i64);
  p.Y = at::randn({E, sh.dim()}, gen, f64);
  p.R = at::randn({E, layout.weight_numel}, gen, f64);
  p.dagg = at::randn({p.nrows, layout.mid.dim()}, gen, f64);
  return p;
}

ConvTPProblem convert(const ConvTPProblem& p, const at::TensorOptions& options) {
  ConvTPProblem q = p;
  const at::Device dev = options.device();
  for (at::Tensor* t : {&q.x, &q.Y, &q.R, &q.dagg}) *t = t->to(options);
  for (at::Tensor* t : {&q.xindex, &q.receiver, &q.row_ptr}) *t = t->to(dev);
  return q;
}

ConvTPReference conv_tp_reference(const ConvTPProblem& p) {
  std::vector<at::Tensor> w3j;
  for (const ConvTPPath& path : p.layout.paths) {
    const int l1 = p.in1[path.i1].ir.l, l2 = p.sh[path.i2].ir.l, l3 = p.layout.mid[path.k].ir.l;
    w3j.push_back(at::tensor(wigner_3j(l1, l2, l3), at::TensorOptions().dtype(at::kDouble))
                      .reshape({2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1})
                      .to(p.x.options()));
  }
  const at::Tensor x = p.x.detach().requires_grad_(true);
  const at::Tensor Y = p.Y.detach().requires_grad_(true);
  const at::Tensor R = p.R.detach().requires_grad_(true);
  const at::Tensor msg = conv_tensor_product(x.index_select(0, p.xindex), Y, R, p.in1, p.sh, p.layout, w3j);
  const at::Tensor agg = at::zeros({p.nrows, p.layout.mid.dim()}, p.x.options()).index_add(0, p.receiver, msg);
  ConvTPReference ref;
  ref.agg = agg.detach();
  if (msg.size(0) == 0) {
    ref.dR = at::zeros_like(p.R);
    ref.dY = at::zeros_like(p.Y);
    ref.dx = at::zeros_like(p.x);
    return ref;
  }
  const std::vector<at::Tensor> g = torch::autograd::grad({agg}, {R, Y, x}, {p.dagg});
  ref.dR = g[0];
  ref.dY = g[1];
  ref.dx = g[2];
  return ref;
}

}  // namespace flashmace::testing
