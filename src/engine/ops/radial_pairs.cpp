#include "engine/ops/radial_pairs.h"

#include <string>

#include "core/error.h"
#include "engine/ops/graph_checks.h"
#include "engine/kernels/pair_rows_kernels.h"

#if FLASHMACE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmace {

namespace {

// Odd 64-bit multipliers for the sort key (the key only groups candidates: pairs are then confirmed
// by comparing every component exactly, so a collision costs a missed pair, never a wrong one).
constexpr int64_t kMix[5] = {static_cast<int64_t>(0x9E3779B97F4A7C15ull), static_cast<int64_t>(0xC2B2AE3D27D4EB4Full),
                             static_cast<int64_t>(0x165667B19E3779F9ull), static_cast<int64_t>(0xD6E8FEB86659FD93ull),
                             static_cast<int64_t>(0xFF51AFD7ED558CCDull)};

}  // namespace

RadialPairs pair_reverse_edges(const at::Tensor& sender, const at::Tensor& receiver, const at::Tensor& vectors,
                               at::ScalarType dtype) {
  const int64_t E = sender.size(0);
  RadialPairs p;
  if (E == 0) {
    p.index = p.first = p.second = at::empty({0}, sender.options());
    p.share = at::empty({0, 1}, vectors.options().dtype(dtype));
    return p;
  }
  const at::Tensor v = vectors.to(at::kDouble).contiguous();
  // Orient every edge canonically: from the lower atom index to the higher, and for an atom's own
  // periodic image (s == r) so that v's first non-zero component is positive. An edge and its
  // reverse then have the same (lo, hi, c) and opposite `flip`.
  const at::Tensor x = v.select(1, 0), y = v.select(1, 1), z = v.select(1, 2);
  const at::Tensor negative = (x < 0) | ((x == 0) & ((y < 0) | ((y == 0) & (z < 0))));
  const at::Tensor flip = (sender > receiver) | ((sender == receiver) & negative);
  // (+ 0.0 turns -0.0, the negation of a zero component, into +0.0, so the bits compare equal)
  const at::Tensor c = (at::where(flip.unsqueeze(1), -v, v) + 0.0).contiguous();
  const at::Tensor bits = c.view(at::kLong);  // exact comparison of the components
  const at::Tensor key = at::stack({at::minimum(sender, receiver), at::maximum(sender, receiver), bits.select(1, 0),
                                    bits.select(1, 1), bits.select(1, 2)},
                                   1);
  at::Tensor hash = key.select(1, 0) * kMix[0];
  for (int k = 1; k < 5; ++k) hash = at::bitwise_xor(hash * kMix[k], key.select(1, k));
  const at::Tensor perm = std::get<1>(at::sort(hash, /*stable=*/true, 0, false));

  // Sorted neighbours i, i+1 pair when their keys are equal, their orientations differ, and the
  // group of equal keys has exactly these two (a neighbour list holds no duplicate edges).
  const at::Tensor ks = key.index_select(0, perm), fs = flip.index_select(0, perm);
  at::Tensor same = at::zeros({E + 1}, sender.options().dtype(at::kBool));  // same[i]: i and i-1 equal
  if (E > 1)
    same.narrow(0, 1, E - 1)
        .copy_((ks.narrow(0, 0, E - 1) == ks.narrow(0, 1, E - 1)).all(1) &
               (fs.narrow(0, 0, E - 1) != fs.narrow(0, 1, E - 1)));
  const at::Tensor start = same.narrow(0, 1, E) & ~same.narrow(0, 0, E) &
                           ~at::cat({same.narrow(0, 2, E - 1), at::zeros({1}, same.options())});
  const at::Tensor second_of_pair = at::cat({at::zeros({1}, same.options()), start.narrow(0, 0, E - 1)});
  const at::Tensor none = at::full({E}, -1, perm.options());
  const at::Tensor partner_sorted =
      at::where(start, at::roll(perm, -1), at::where(second_of_pair, at::roll(perm, 1), none));
  const at::Tensor partner = at::empty_like(perm).scatter_(0, perm, partner_sorted);

  // Rows in edge order: an unpaired edge, or the lower edge of a pair, opens a row.
  const at::Tensor edge = at::arange(E, perm.options());
  const at::Tensor opens = (partner < 0) | (edge < partner);
  const at::Tensor row = at::cumsum(opens, 0) - 1;
  p.index = at::where(opens, row, row.index_select(0, partner.clamp_min(0)));
  p.first = at::nonzero(opens).squeeze(1);
  p.second = partner.index_select(0, p.first);
  p.rows = p.first.size(0);
  p.share = at::where(partner >= 0, 0.5, 1.0).to(dtype).unsqueeze(1);
  return p;
}

const std::vector<RadialPairs>& RadialPairCache::pairs(const at::Tensor& sender, const at::Tensor& receiver,
                                                       const at::Tensor& vectors, const std::vector<Chunk>& chunks,
                                                       at::ScalarType dtype, int64_t edges_id) {
  bool any = false;
  for (const Chunk& c : chunks) any = any || c.paired;
  if (!any) {  // nothing to pair, nothing to check
    const int64_t generation = generation_ + 1;
    *this = RadialPairCache{};
    generation_ = generation;
    pairs_.assign(chunks.size(), RadialPairs{});
    return pairs_;
  }
  if (generation_ > 0 && chunks == chunks_ && dtype == dtype_ && sender.size(0) == edges_ &&
      sender.device() == device_) {
    const bool same_edges = edges_id >= 0 ? edges_id == edges_id_
                                          : sender_.defined() && all_equal({{sender, sender_}, {receiver, receiver_}});
    // Each pair's rows (first, second: edges within its chunk) still hold exact negations.
    std::vector<NegatedPairs> sets;
    for (std::size_t k = 0; k < chunks.size(); ++k)
      if (chunks[k].paired && pairs_[k].rows > 0)
        sets.push_back({vectors.narrow(0, chunks[k].begin, chunks[k].count), pairs_[k].first, pairs_[k].second});
    if (same_edges && all_negated(sets)) return pairs_;
  }
  pairs_.assign(chunks.size(), RadialPairs{});
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    const Chunk& c = chunks[k];
    if (!c.paired) continue;
    pairs_[k] = pair_reverse_edges(sender.narrow(0, c.begin, c.count), receiver.narrow(0, c.begin, c.count),
                                   vectors.narrow(0, c.begin, c.count), dtype);
  }
  sender_ = edges_id >= 0 ? at::Tensor() : sender.clone();
  receiver_ = edges_id >= 0 ? at::Tensor() : receiver.clone();
  edges_ = sender.size(0);
  device_ = sender.device();
  chunks_ = chunks;
  dtype_ = dtype;
  edges_id_ = edges_id;
  ++generation_;
  return pairs_;
}

RadialPairs pad_pair_rows(const RadialPairs& p, int64_t rows) {
  if (rows == p.rows) return p;
  if (rows < p.rows || p.index.size(0) == 0)
    throw Error("radial pairs: cannot pad " + std::to_string(p.rows) + " rows to " + std::to_string(rows));
  RadialPairs q = p;
  const int64_t extra = rows - p.rows;
  q.first = at::cat({p.first, at::zeros({extra}, p.first.options())});
  q.second = at::cat({p.second, at::full({extra}, -1, p.second.options())});
  q.rows = rows;
  return q;
}

void copy_pairs_keeping_storage(RadialPairs& to, const RadialPairs& from) {
  if (to.rows != from.rows || !to.index.defined() || !to.index.sizes().equals(from.index.sizes()))
    throw Error("radial pairs: copy_pairs_keeping_storage needs pairs of the same sizes");
  to.index.copy_(from.index);
  to.first.copy_(from.first);
  to.second.copy_(from.second);
  to.share.copy_(from.share);
}

at::Tensor sum_pair_rows(const RadialPairs& p, const at::Tensor& per_edge) {
#if FLASHMACE_CUDA_KERNELS
  if (per_edge.is_cuda() && per_edge.dim() == 2) {
    const at::Tensor x = per_edge.contiguous(), first = p.first.contiguous(), second = p.second.contiguous();
    at::Tensor out = at::empty({first.size(0), x.size(1)}, x.options());
    const c10::cuda::CUDAGuard guard(x.device());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "sum_pair_rows", [&] {
      pair_rows_sum_cuda(x.data_ptr<scalar_t>(), first.data_ptr<int64_t>(), second.data_ptr<int64_t>(), out.size(0),
                         out.size(1), out.data_ptr<scalar_t>(),
                         c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
    });
    return out;
  }
#endif
  const at::Tensor a = per_edge.index_select(0, p.first);
  const at::Tensor b = per_edge.index_select(0, p.second.clamp_min(0));
  return at::where((p.second >= 0).unsqueeze(1), a + b, a);
}

}  // namespace flashmace
