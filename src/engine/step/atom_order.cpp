#include "engine/step/atom_order.h"

#include "core/error.h"

namespace flashmace {

namespace {

// The 21 low bits of each value spread to every third bit (bit k to bit 3k).
at::Tensor spread_bits(at::Tensor v) {
  v = v.bitwise_and(0x1fffff);
  v = v.bitwise_or(v.bitwise_left_shift(32)).bitwise_and(0x1f00000000ffffLL);
  v = v.bitwise_or(v.bitwise_left_shift(16)).bitwise_and(0x1f0000ff0000ffLL);
  v = v.bitwise_or(v.bitwise_left_shift(8)).bitwise_and(0x100f00f00f00f00fLL);
  v = v.bitwise_or(v.bitwise_left_shift(4)).bitwise_and(0x10c30c30c30c30c3LL);
  v = v.bitwise_or(v.bitwise_left_shift(2)).bitwise_and(0x1249249249249249LL);
  return v;
}

}  // namespace

at::Tensor space_filling_order(const at::Tensor& positions, int64_t nlocal, double bin) {
  const int64_t ntotal = positions.size(0);
  if (nlocal < 0 || nlocal > ntotal || !(bin > 0)) throw Error("space_filling_order: invalid sizes or bin");
  const auto i64 = positions.options().dtype(at::kLong);
  const at::Tensor rest = at::arange(nlocal, ntotal, i64);
  if (nlocal < 2) return at::cat({at::arange(nlocal, i64), rest});
  const at::Tensor x = at::nan_to_num(positions.narrow(0, 0, nlocal), 0.0, 0.0, 0.0);
  const at::Tensor lo = std::get<0>(x.min(0));
  // (at most 2^21 bins per axis: a box wider than 2^21 bins gets coarser bins)
  const double width = (std::get<0>(x.max(0)) - lo).max().item<double>();
  const double edge = std::max(bin, width / 2097151.0);
  const at::Tensor cells = at::clamp(at::floor((x - lo) / edge), 0, 2097151).to(at::kLong);
  const at::Tensor key = spread_bits(cells.select(1, 0))
                             .bitwise_or(spread_bits(cells.select(1, 1)).bitwise_left_shift(1))
                             .bitwise_or(spread_bits(cells.select(1, 2)).bitwise_left_shift(2));
  const at::Tensor owned = std::get<1>(at::sort(key, /*stable=*/true, 0, false));
  return at::cat({owned, rest});
}

}  // namespace flashmace
