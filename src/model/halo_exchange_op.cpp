#include "model/halo_exchange_op.h"

#include <torch/csrc/autograd/custom_function.h>

#include "model/device.h"

namespace flashmace {

namespace {

enum class Direction { Forward, Reverse };

// float64 rows on the host, or in the model's memory for an exchanger that takes them there.
at::Tensor exchanged(const at::Tensor& x, HaloExchanger* exchanger, Direction direction) {
  const at::Device where = exchanger->rows_in_model_memory() ? x.device() : at::Device(at::kCPU);
  at::Tensor rows = x.detach().to(where, at::kDouble, /*non_blocking=*/false, /*copy=*/true).contiguous();
  // The exchanger works on other streams: the device must be done with the rows.
  if (rows.is_cuda()) synchronize_device(rows.device().str());
  const int ncols = static_cast<int>(rows.numel() / std::max<int64_t>(1, rows.size(0)));
  if (direction == Direction::Forward)
    exchanger->forward(rows.data_ptr<double>(), ncols);
  else
    exchanger->reverse(rows.data_ptr<double>(), ncols);
  return rows.to(x.options());
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
