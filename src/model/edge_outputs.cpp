#include "model/edge_outputs.h"

namespace flashmace {

at::Tensor forces_from_edge_gradients(const at::Tensor& grad, const at::Tensor& sender, const at::Tensor& receiver,
                                      int64_t nodes) {
  return at::zeros({nodes, 3}, grad.options()).index_add_(0, sender, grad).index_add_(0, receiver, -grad);
}

at::Tensor virial_from_edge_gradients(const at::Tensor& vectors, const at::Tensor& grad) {
  const at::Tensor vg = at::matmul(vectors.t(), grad);
  return -0.5 * (vg + vg.t());
}

at::Tensor atom_virial_from_edge_gradients(const at::Tensor& vectors, const at::Tensor& grad, const at::Tensor& sender,
                                           const at::Tensor& receiver, int64_t nodes) {
  const at::Tensor w = -vectors.unsqueeze(2) * grad.unsqueeze(1);  // [E, 3, 3]
  auto at_ = [&](int a, int b) { return w.select(1, a).select(1, b); };
  const at::Tensor voigt = at::stack({at_(0, 0), at_(1, 1), at_(2, 2), 0.5 * (at_(0, 1) + at_(1, 0)),
                                      0.5 * (at_(0, 2) + at_(2, 0)), 0.5 * (at_(1, 2) + at_(2, 1))},
                                     1);
  const at::Tensor half = 0.5 * voigt;
  return at::zeros({nodes, 6}, half.options()).index_add_(0, sender, half).index_add_(0, receiver, half);
}

}  // namespace flashmace
