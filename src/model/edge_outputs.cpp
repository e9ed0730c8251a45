#include "model/edge_outputs.h"

namespace flashmace {

at::Tensor index_sum(const at::Tensor& values, const at::Tensor& index, int64_t n) {
  if (values.size(0) == 0) {
    std::vector<int64_t> shape = values.sizes().vec();
    shape[0] = n;
    return at::zeros(shape, values.options());
  }
  const at::Tensor order = std::get<1>(at::sort(index, /*stable=*/true, 0, false));
  const at::Tensor lengths = at::bincount(index, {}, n);
  return at::segment_reduce(values.index_select(0, order), "sum", lengths, {}, {}, 0, /*unsafe=*/true, at::Scalar(0));
}

at::Tensor forces_from_edge_gradients(const at::Tensor& grad, const at::Tensor& sender, const at::Tensor& receiver,
                                      int64_t nodes) {
  return index_sum(grad, sender, nodes) - index_sum(grad, receiver, nodes);
}

at::Tensor virial_from_edge_gradients(const at::Tensor& vectors, const at::Tensor& grad) {
  const at::Tensor vg = at::matmul(vectors.t(), grad);
  return -0.5 * (vg + vg.t());
}

at::Tensor half_edge_virials(const at::Tensor& vectors, const at::Tensor& grad) {
  const at::Tensor w = -vectors.unsqueeze(2) * grad.unsqueeze(1);  // [E, 3, 3]
  auto at_ = [&](int a, int b) { return w.select(1, a).select(1, b); };
  const at::Tensor voigt = at::stack({at_(0, 0), at_(1, 1), at_(2, 2), 0.5 * (at_(0, 1) + at_(1, 0)),
                                      0.5 * (at_(0, 2) + at_(2, 0)), 0.5 * (at_(1, 2) + at_(2, 1))},
                                     1);
  return 0.5 * voigt;
}

at::Tensor atom_virial_from_edge_gradients(const at::Tensor& vectors, const at::Tensor& grad, const at::Tensor& sender,
                                           const at::Tensor& receiver, int64_t nodes) {
  const at::Tensor half = half_edge_virials(vectors, grad);
  return index_sum(half, sender, nodes) + index_sum(half, receiver, nodes);
}

}  // namespace flashmace
