#pragma once
// The halo exchange as an autograd op: forward fills ghost rows from their owners, backward sums
// ghost-row gradients into the owners (DESIGN.md idea 4). Any dtype/device; the exchanger works on
// host doubles, so features take one host round trip per layer.
#include <ATen/ATen.h>

#include "core/local_graph.h"

namespace flashmace {

at::Tensor halo_exchange(const at::Tensor& features, HaloExchanger* exchanger);

}  // namespace flashmace
