#include "engine/ops/gate_backward.h"

#include <vector>

#include "model/e3nn_ops.h"

namespace flashmace {

at::Tensor gate_backward(const at::Tensor& x, const at::Tensor& grad, const Irreps& out) {
  const int64_t n = x.size(0);
  int64_t scalars = 0, gates = 0;
  for (const auto& b : out.blocks()) (b.ir.l == 0 ? scalars : gates) += b.mul;
  // scalars: c silu(x), d/dx = c sigmoid(x) (1 + x (1 - sigmoid(x)))
  const at::Tensor xs = x.narrow(1, 0, scalars), sig_s = at::sigmoid(xs);
  std::vector<at::Tensor> gx = {grad.narrow(1, 0, scalars) * (kSiluNormalization * sig_s * (1.0 + xs * (1.0 - sig_s)))};
  std::vector<at::Tensor> gated;
  int64_t gate_offset = scalars, x_offset = scalars + gates, g_offset = scalars;
  for (const auto& b : out.blocks()) {
    if (b.ir.l == 0) continue;
    const at::Tensor sig = at::sigmoid(x.narrow(1, gate_offset, b.mul));  // [n, mul]
    const at::Tensor xb = x.narrow(1, x_offset, b.dim()).reshape({n, b.mul, b.ir.dim()});
    const at::Tensor gb = grad.narrow(1, g_offset, b.dim()).reshape({n, b.mul, b.ir.dim()});
    // y = c sigmoid(x_gate) x_block per channel
    gx.push_back((gb * xb).sum(2) * (kSigmoidNormalization * sig * (1.0 - sig)));
    gated.push_back((gb * (kSigmoidNormalization * sig).unsqueeze(2)).reshape({n, b.dim()}));
    gate_offset += b.mul;
    x_offset += b.dim();
    g_offset += b.dim();
  }
  gx.insert(gx.end(), gated.begin(), gated.end());
  return at::cat(gx, 1);
}

}  // namespace flashmace
