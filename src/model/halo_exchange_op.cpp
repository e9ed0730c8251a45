#include "model/halo_exchange_op.h"

#include <torch/csrc/autograd/custom_function.h>

namespace flashmace {

namespace {

enum class Direction { Forward, Reverse };

at::Tensor exchanged(const at::Tensor& x, HaloExchanger* exchanger, Direction direction) {
  at::Tensor host = x.detach().to(at::kCPU, at::kDouble, /*non_blocking=*/false, /*copy=*/true).contiguous();
  const int ncols = static_cast<int>(host.numel() / std::max<int64_t>(1, host.size(0)));
  if (direction == Direction::Forward)
    exchanger->forward(host.data_ptr<double>(), ncols);
  else
    exchanger->reverse(host.data_ptr<double>(), ncols);
  return host.to(x.options());
}

struct HaloExchangeFunction : public torch::autograd::Function<HaloExchangeFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, int64_t exchanger) {
    ctx->saved_data["exchanger"] = exchanger;
    return exchanged(x, reinterpret_cast<HaloExchanger*>(exchanger), Direction::Forward);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto* exchanger = reinterpret_cast<HaloExchanger*>(ctx->saved_data["exchanger"].toInt());
    return {exchanged(grad[0], exchanger, Direction::Reverse), at::Tensor()};
  }
};

}  // namespace

at::Tensor halo_exchange(const at::Tensor& features, HaloExchanger* exchanger) {
  // The pointer travels as an integer because autograd contexts only store IValues.
  return HaloExchangeFunction::apply(features, reinterpret_cast<int64_t>(exchanger));
}

}  // namespace flashmace
