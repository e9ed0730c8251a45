#include "engine/step/skin_list.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/host_transfers.h"
#include "engine/evaluator.h"
#include "engine/kernels/skin_compaction_kernels.h"
#include "engine/ops/conv_tp_op.h"
#include "engine/ops/species_linear.h"
#include "engine/step/message_stage.h"

#if FLASHMACE_CUDA_KERNELS
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmace {

namespace {

at::Tensor prefix(const at::Tensor& counts) {  // [n] -> [n + 1] exclusive scan with the total last
  return at::cat({at::zeros({1}, counts.options()), at::cumsum(counts, 0)});
}

// Each node's element slot among the elements present (present_index: their atomic-number indices).
at::Tensor element_slots(const at::Tensor& atomic_numbers, const at::Tensor& species, const at::Tensor& present_index) {
  return at::zeros({atomic_numbers.size(0)}, species.options())
      .index_put_({present_index}, at::arange(present_index.size(0), species.options()))
      .index_select(0, species);
}

}  // namespace

int64_t skin_bucket(int64_t count, int64_t previous, int headroom) {
  // count / 128 at first: a list lives while no atom moved more than half the skin, in which time
  // the count moves by a few tenths of a percent in dense matter, and padding edges cost as much as
  // real ones; each bucket overflow doubles it, up to count / 16 (headroom 0..3). Hysteresis: the
  // last list's bucket while it holds this count with half the headroom to spare and wastes at
  // most four times it (a captured step of that size is then replayed for the new list); else the
  // headroom in steps of ~0.2 %.
  const int64_t h = count >> (7 - std::clamp(headroom, 0, 3));
  if (previous >= count + h / 2 + 32 && previous <= count + 4 * h + 1024) return previous;
  int64_t granule = 256;
  while (granule * 512 < count) granule *= 2;
  return (count + h + 64 + granule - 1) / granule * granule;
}

void check_finite_positions(const at::Tensor& positions) {
  const at::Tensor bad = ~at::isfinite(positions).all(1);
  if (!bad.any().item<bool>()) return;
  throw NonFinitePositionError(at::nonzero(bad)[0][0].item<int64_t>());
}

namespace {

// image . cell, as (n_a a + n_b b) + n_c c: negating the offsets negates the shift exactly.
at::Tensor image_shift(const at::Tensor& image, const at::Tensor& cell) {
  return (image.narrow(1, 0, 1) * cell.narrow(0, 0, 1) + image.narrow(1, 1, 1) * cell.narrow(0, 1, 1)) +
         image.narrow(1, 2, 1) * cell.narrow(0, 2, 1);
}

}  // namespace

at::Tensor list_vectors(const at::Tensor& x, const at::Tensor& cell, const at::Tensor& sender,
                        const at::Tensor& receiver, const at::Tensor& image) {
  return (x.index_select(0, receiver) - x.index_select(0, sender)) - image_shift(image, cell);
}

EdgesWithin edges_within(const ListTensors& list, const at::Tensor& positions, const at::Tensor& cell, double cutoff,
                         double min_distance) {
  check_finite_positions(positions);
  const GraphTensors& g = list.graph;
  const at::Tensor v = list_vectors(positions, cell, g.sender, g.receiver, list.image);
  const at::Tensor len2 = (v * v).sum(1);
  const at::Tensor keep = at::nonzero(len2 < cutoff * cutoff).squeeze(1);
  if (keep.size(0) > 0 && min_distance > 0) {
    const at::Tensor kept = len2.index_select(0, keep);
    const int64_t k = kept.argmin().item<int64_t>();
    const double d = std::sqrt(kept[k].item<double>());
    if (d < min_distance) {
      const int64_t e = keep[k].item<int64_t>();
      throw TooCloseError(g.sender[e].item<int64_t>(), g.receiver[e].item<int64_t>(), d);
    }
  }
  return {GraphTensors{g.species, g.sender.index_select(0, keep), g.receiver.index_select(0, keep)},
          v.index_select(0, keep)};
}

SkinList SkinList::build(const ListTensors& list, const at::Tensor& positions, const at::Tensor& cell, double cutoff,
                         TopologyOptions options, bool pairs, at::ScalarType dtype, const at::Tensor& atomic_numbers,
                         const std::pair<int64_t, int64_t>& previous, int headroom) {
  const GraphTensors& g = list.graph;
  if (list.nlocal < 1) throw Error("skin list: needs at least one owned atom");
  SkinList s;
  s.cutoff_ = cutoff;
  s.nlocal_ = list.nlocal;
  const int64_t ntotal = g.species.size(0);
  // The list in the topology's (receiver, sender element) order (edge_topology.h); a list in that
  // order already (the pair styles' lists, grouped by receiver, of one element) costs one check.
  const int64_t F = g.receiver.size(0);
  const at::Tensor key = receiver_element_key(g.receiver, g.sender, g.species, atomic_numbers.size(0));
  if (F < 2 || (key.narrow(0, 1, F - 1) >= key.narrow(0, 0, F - 1)).all().item<bool>()) {
    s.f_order_ = at::arange(F, g.receiver.options());
    s.f_recv_ = g.receiver;
  } else {
    s.f_order_ = std::get<1>(at::sort(key, /*stable=*/true, 0, false));
    s.f_recv_ = g.receiver.index_select(0, s.f_order_);
  }
  s.f_send_ = g.sender.index_select(0, s.f_order_);
  s.f_image_ = list.image.to(at::kDouble).index_select(0, s.f_order_);
  s.f_row_ptr_ = row_pointer(s.f_recv_, list.nlocal);
  s.shift_ = at::empty_like(s.f_image_);
  s.set_cell(cell);
  const at::Tensor full = s.vectors(positions);
  s.z_node_ = atomic_numbers.index_select(0, g.species);
  s.status_ = at::zeros({3}, full.options());
  // (an edge and its reverse have exactly negated vectors, so the same length)
  const at::Tensor len2 = (full * full).sum(1);
  const at::Tensor within = len2 < cutoff * cutoff;
  const int64_t count = within.sum().item<int64_t>();
  s.edges_within = count;
  if (skin_bucket(count, previous.first, headroom) > options.edge_chunk || options.atom_chunk < list.nlocal) {
    s.build_blocks(full, within, options, pairs, dtype, g.species);
    if (!s.blocks_.empty()) s.slot_node_ = element_slots(atomic_numbers, g.species, s.topology.present_index);
    return s;
  }
  if (pairs) {
    const RadialPairs p = pair_reverse_edges(s.f_send_, s.f_recv_, full, dtype);
    s.f_index_ = p.index;
    s.f_first_ = p.first;
    s.f_second_ = p.second;
    s.f_share_ = p.share;
  }
  // The compacted topology's shape: a bucket with headroom over the edges within the cutoff now
  // (its tensors are written by every compact()).
  options.padded_edges = skin_bucket(count, previous.first, headroom);
  options.padded_atoms = options.padded_atoms > 0 ? std::max(options.padded_atoms, ntotal) : ntotal;
  options.edge_chunk = std::max(options.edge_chunk, options.padded_edges);
  s.topology = EdgeTopology::bucket(g.species, list.nlocal, count, options);
  const EdgeTopology& t = s.topology;
  s.slot_node_ = element_slots(atomic_numbers, g.species, t.present_index);
  const XIndexCsr by_sender = xindex_csr(s.f_send_, t.padded_atoms);
  s.f_sender_order_ = by_sender.perm;
  s.f_sender_sorted_ = s.f_send_.index_select(0, by_sender.perm);
  s.f_sender_ptr_ = by_sender.ptr;
  if (pairs) {
    // Rows: the pairs and single edges within the cutoff, one shared by the padding edges, and
    // headroom.
    const int64_t rows = s.within_rows(len2).sum().item<int64_t>();
    s.pair_rows = rows;
    const int64_t bucket_rows = skin_bucket(rows + 1, previous.second, headroom);
    RadialPairs p;
    p.rows = bucket_rows;
    p.index = at::zeros({t.padded_edges}, g.sender.options());
    p.first = at::zeros({bucket_rows}, g.sender.options());
    p.second = at::full({bucket_rows}, -1, g.sender.options());
    p.share = at::ones({t.padded_edges, 1}, s.f_share_.options());
    s.pairs.assign(1, p);
  }
  Block whole;
  whole.nrows = list.nlocal;
  whole.list1 = F;
  whole.bucket = t.padded_edges;
  s.blocks_.push_back(whole);
#if FLASHMACE_CUDA_KERNELS
  if (full.is_cuda()) {
    const int64_t rows = s.f_first_.defined() ? s.f_first_.size(0) : 0;
    s.f_sender_rank_ = at::empty_like(s.f_sender_order_).index_put_({s.f_sender_order_}, at::arange(F, s.f_send_.options()));
    s.scans_ = at::empty({2 * (F + 1) + rows + 1}, s.f_send_.options());
    const c10::cuda::CUDAGuard guard(full.device());
    s.scan_temp_ = at::empty({static_cast<int64_t>(skin_compaction_scan_bytes(2 * (F + 1) + rows + 1))},
                             full.options().dtype(at::kByte));
    s.words_ = at::zeros({2}, s.f_send_.options());
  }
#endif
  return s;
}

namespace {

// A block's bucket: ~1.6 % headroom over the edges within the cutoff at the list build (padding
// edges cost as much as real ones, and the count moves by well under 1 % while a list lives; an
// overflow rebuilds the blocks), on a granule of 32 (blocks are chunks of the memory plan, not
// graph shapes).
int64_t block_bucket(int64_t count) { return (count + count / 64 + 32 + 31) / 32 * 32; }

}  // namespace

void SkinList::build_blocks(const at::Tensor& full, const at::Tensor& within_mask, TopologyOptions options, bool pairs,
                            at::ScalarType dtype, const at::Tensor& species) {
  const int64_t N = nlocal_;
  const auto i64 = f_send_.options();
  const at::Tensor within = within_mask.to(at::kLong);
  const at::Tensor cx = prefix(within);
  // Per row: its first listed edge and the edges within the cutoff before it (one copy each).
  const at::Tensor list_ptr = f_row_ptr_.to(at::kCPU).contiguous();
  const at::Tensor within_before = cx.index_select(0, f_row_ptr_).to(at::kCPU).contiguous();
  const int64_t* lp = list_ptr.data_ptr<int64_t>();
  const int64_t* wb = within_before.data_ptr<int64_t>();
  std::vector<Block> blocks;
  Block b;
  int64_t edges = 0, offset = 0;
  auto close = [&] {
    b.list1 = lp[b.row0 + b.nrows];
    b.bucket = block_bucket(edges);
    b.offset = offset;
    offset += b.bucket;
    blocks.push_back(b);
  };
  for (int64_t r = 0; r < N; ++r) {
    const int64_t c = wb[r + 1] - wb[r];
    if (b.nrows > 0 && (b.nrows >= options.atom_chunk || block_bucket(edges + c) > options.edge_chunk)) {
      close();
      b = Block{};
      edges = 0;
    }
    if (b.nrows == 0) {
      b.row0 = r;
      b.list0 = lp[r];
    }
    ++b.nrows;
    edges += c;
  }
  close();
  for (const Block& x : blocks)
    if (x.bucket > options.edge_chunk) return;  // (one row beyond a chunk: blocks_ stays empty)

  options.row_aligned = true;
  options.padded_edges = offset;
  options.padded_atoms = std::max(options.padded_atoms, species.size(0));
  std::vector<EdgeTopology::RowBlock> rows;
  for (const Block& x : blocks) rows.push_back({x.row0, x.nrows, x.bucket});
  topology = EdgeTopology::bucket(species, N, wb[N], options, rows);
  if (pairs) {
    for (Block& x : blocks) {
      const int64_t L = x.list1 - x.list0;
      if (L > 0)
        x.list_pairs = pair_reverse_edges(f_send_.narrow(0, x.list0, L), f_recv_.narrow(0, x.list0, L),
                                          full.narrow(0, x.list0, L), dtype);
      // Rows: the pairs and single edges within the cutoff, one shared by the padding edges, and
      // headroom.
      const int64_t used = L == 0 ? 0 : within.narrow(0, x.list0, L).index_select(0, x.list_pairs.first).sum().item<int64_t>();
      pair_rows += used;
      RadialPairs p;
      p.rows = block_bucket(used + 1);
      p.index = at::zeros({x.bucket}, i64);
      p.first = at::zeros({p.rows}, i64);
      p.second = at::full({p.rows}, -1, i64);
      p.share = at::ones({x.bucket, 1}, full.options().dtype(dtype));
      this->pairs.push_back(p);
    }
  }
#if FLASHMACE_CUDA_KERNELS
  if (full.is_cuda()) {
    // The fused pass per block: its row pointers from 0 and its own sender order; one set of scan
    // buffers, the largest block's (the blocks compact one after another on the stream).
    int64_t most = 0;
    for (Block& x : blocks) {
      const int64_t L = x.list1 - x.list0;
      x.row_ptr = f_row_ptr_.narrow(0, x.row0, x.nrows + 1) - x.list0;
      if (!topology.chunk_senders.empty()) {
        const XIndexCsr c = xindex_csr(f_send_.narrow(0, x.list0, L), topology.padded_atoms);
        x.sender_rank = at::empty_like(c.perm).index_put_({c.perm}, at::arange(L, i64));
        x.sender_ptr = c.ptr;
      }
      const int64_t rows = x.list_pairs.first.defined() ? x.list_pairs.first.size(0) : 0;
      most = std::max(most, 2 * (L + 1) + rows + 1);
    }
    scans_ = at::empty({most}, i64);
    const c10::cuda::CUDAGuard guard(full.device());
    scan_temp_ = at::empty({static_cast<int64_t>(skin_compaction_scan_bytes(most))}, full.options().dtype(at::kByte));
    words_ = at::zeros({2}, i64);
  }
#endif
  blocks_ = std::move(blocks);
}

void SkinList::atom_sums_order(EdgeTopology* topo) {
  if (!topo->sender_order.defined()) return;
  // Deterministic per-atom sums: every edge in sender order (stable), and the rows' extents.
  const int64_t A = topo->padded_atoms;
  const XIndexCsr s = xindex_csr(topo->sender, A);
  topo->sender_order.copy_(s.perm);
  topo->sender_ptr.copy_(s.ptr);
  topo->sender_counts.copy_(s.ptr.diff());
  const at::Tensor counts = at::bincount(topo->receiver, {}, A);
  topo->receiver_counts.copy_(counts);
  topo->receiver_ptr.copy_(prefix(counts));
}

// Block by block, compact_reference()'s steps on the block's rows and listed edges, into its chunk;
// then the per-atom sums' sender order over every chunk.
void SkinList::compact_blocks(const at::Tensor& positions, EdgeTopology* topo, std::vector<RadialPairs>* pairs,
                              at::Tensor* v64) {
  const int64_t A = topo->padded_atoms;
  const auto i64 = f_send_.options();
  at::Tensor overflow = at::zeros({1}, i64);
  at::Tensor closest = at::full({1}, 1e300, positions.options());
  for (std::size_t k = 0; k < blocks_.size(); ++k) {
    const Block& b = blocks_[k];
    const int64_t L = b.list1 - b.list0, B = b.bucket, n = b.nrows;
    const at::Tensor recv_l = f_recv_.narrow(0, b.list0, L), send_l = f_send_.narrow(0, b.list0, L);
    const at::Tensor full = (positions.index_select(0, recv_l) - positions.index_select(0, send_l)) -
                            shift_.narrow(0, b.list0, L);
    const at::Tensor len2 = (full * full).sum(1);
    const at::Tensor m = len2 < cutoff_ * cutoff_;
    const at::Tensor cx = prefix(m.to(at::kLong));  // [L + 1]
    const at::Tensor count = cx.narrow(0, L, 1);
    const at::Tensor D = at::clamp_min(B - count, 0);
    const at::Tensor P = at::div(at::arange(n + 1, i64) * D, n, "floor");  // padding before each row
    const at::Tensor rp = cx.index_select(0, f_row_ptr_.narrow(0, b.row0, n + 1) - b.list0) + P;  // [n + 1]
    const at::Tensor dump = at::full({1}, B, i64);
    at::Tensor pos = cx.narrow(0, 0, L) + P.index_select(0, recv_l - b.row0);
    pos = at::where(m & (pos < B), pos, dump);
    at::Tensor src = at::full({B + 1}, L, i64);
    src.index_put_({pos}, at::arange(L, i64));
    src = src.narrow(0, 0, B);
    const at::Tensor real = src < L, srcc = at::clamp(src, 0, std::max<int64_t>(L - 1, 0));
    const at::Tensor slot = at::arange(B, i64);
    const at::Tensor row = at::clamp(at::searchsorted(rp, slot, /*out_int32=*/false, /*right=*/true) - 1, 0, n - 1);
    const at::Tensor recv = row + b.row0;
    const at::Tensor send = L > 0 ? at::where(real, send_l.index_select(0, srcc), recv) : recv;
    at::Tensor far = at::zeros({1, 3}, full.options());
    far.select(1, 0).fill_(4.0 * cutoff_ + 10.0);
    v64->narrow(0, b.offset, B).copy_(L > 0 ? at::where(real.unsqueeze(1), full.index_select(0, srcc), far) : far.expand({B, 3}));
    topo->sender.narrow(0, b.offset, B).copy_(send);
    topo->receiver.narrow(0, b.offset, B).copy_(recv);
    if (topo->z_sender.defined()) {
      topo->z_sender.narrow(0, b.offset, B).copy_(z_node_.index_select(0, send));
      topo->z_receiver.narrow(0, b.offset, B).copy_(z_node_.index_select(0, recv));
    }
    topo->sender_slot.narrow(0, b.offset, B).copy_(slot_node_.index_select(0, send));
    topo->chunk_rows[k].copy_(row);
    topo->chunk_row_ptr[k].copy_(rp);
    if (!topo->chunk_senders.empty()) {
      // By sender (stable), each atom's padding edges after its real ones, as the CUDA pass orders them.
      const at::Tensor key = send * 2 + (~real).to(at::kLong);
      topo->chunk_senders[k].perm.copy_(std::get<1>(at::sort(key, /*stable=*/true, 0, false)));
      topo->chunk_senders[k].ptr.copy_(prefix(at::bincount(send, {}, A)));
    }
    if (pairs && !pairs->empty()) compact_block_pairs(b, len2, pos, real, srcc, &(*pairs)[k], &overflow);
    overflow = overflow + (count > B).to(at::kLong);
    if (L > 0) closest = at::minimum(closest, at::where(m, len2, at::full({1}, 1e300, len2.options())).min().reshape({1}));
  }
  atom_sums_order(topo);
  const at::Tensor non_finite = (~at::isfinite(positions)).sum().to(at::kDouble).reshape({1});
  status_.copy_(at::cat({overflow.to(at::kDouble), closest, non_finite}));
}

// A block's pairs from its edges' squared lengths [L], slots [L] (B: none), and each of its B
// slots' listed edge (src, within the block) and whether it holds one (real).
void SkinList::compact_block_pairs(const Block& b, const at::Tensor& len2, const at::Tensor& pos, const at::Tensor& real,
                                   const at::Tensor& src, RadialPairs* out, at::Tensor* overflow) const {
  const auto i64 = f_send_.options();
  const RadialPairs& lp = b.list_pairs;
  const int64_t L = b.list1 - b.list0, U = out->rows, B = b.bucket;
  const at::Tensor pad = (~real).to(at::kLong).argmax().reshape({1});  // (the first padding slot)
  if (L == 0) {  // padding only: every slot reads row 0, made from the first slot
    out->index.zero_();
    out->first.zero_();
    out->second.fill_(-1);
    out->share.fill_(1);
    return;
  }
  const int64_t Ul = lp.first.size(0);
  const at::Tensor mrow = len2.index_select(0, lp.first) < cutoff_ * cutoff_;
  const at::Tensor crow = prefix(mrow.to(at::kLong));
  const at::Tensor used = crow.narrow(0, Ul, 1);  // real rows
  const at::Tensor rdump = at::full({1}, U, i64);
  const at::Tensor rowpos = at::where(mrow & (crow.narrow(0, 0, Ul) < U), crow.narrow(0, 0, Ul), rdump);
  // Real slots read their listed edge's row, padding ones the shared row after the real ones.
  const at::Tensor index = at::where(real, rowpos.index_select(0, lp.index.index_select(0, src)), used);
  out->index.copy_(at::clamp_max(index, U - 1));
  at::Tensor first = at::zeros({U + 1}, i64), second = at::full({U + 1}, -1, i64);
  first.index_put_({rowpos}, pos.index_select(0, lp.first));
  const at::Tensor pos_ext = at::cat({pos, at::full({1}, B, i64)});
  const at::Tensor partner = pos_ext.index_select(0, at::where(lp.second >= 0, lp.second, at::full({1}, L, i64)));
  second.index_put_({rowpos}, at::where((lp.second >= 0) & (partner < B), partner, at::full({1}, -1, i64)));
  first.index_put_({at::where((~real).index_select(0, pad) & (used < U), used, rdump)}, pad);
  out->first.copy_(first.narrow(0, 0, U));
  out->second.copy_(second.narrow(0, 0, U));
  out->share.copy_(at::where(real.unsqueeze(1), lp.share.index_select(0, src), at::ones({1, 1}, lp.share.options())));
  *overflow = *overflow + (used + 1 > U).to(at::kLong);
}

void SkinList::request_status() {
#if FLASHMACE_CUDA_KERNELS
  if (status_.is_cuda()) {
    const c10::cuda::CUDAGuard guard(status_.device());
    if (!status_host_.defined()) {
      status_host_ = at::empty({3}, at::TensorOptions().dtype(at::kDouble).pinned_memory(true));
      copied_ = std::make_shared<c10::cuda::CUDAEvent>();
    }
    status_host_.copy_(status_, /*non_blocking=*/true);
    count_to_host(status_.numel() * static_cast<int64_t>(sizeof(double)));
    copied_->record(c10::cuda::getCurrentCUDAStream());
    return;
  }
#endif
  status_host_ = status_.clone();
}

at::Tensor SkinList::host_status() {
#if FLASHMACE_CUDA_KERNELS
  if (copied_) copied_->synchronize();
#endif
  return status_host_;
}

void SkinList::set_cell(const at::Tensor& cell) { shift_.copy_(image_shift(f_image_, cell)); }

at::Tensor SkinList::vectors(const at::Tensor& positions) const {
  return (positions.index_select(0, f_recv_) - positions.index_select(0, f_send_)) - shift_;
}

// Whether each listed edge is within the cutoff; with pairs, decided by each pair's first edge.
at::Tensor SkinList::within(const at::Tensor& full) const { return within_edges((full * full).sum(1)); }

at::Tensor SkinList::within_rows(const at::Tensor& len2) const {
  return len2.index_select(0, f_first_) < cutoff_ * cutoff_;
}

at::Tensor SkinList::within_edges(const at::Tensor& len2) const {
  if (!f_first_.defined()) return len2 < cutoff_ * cutoff_;
  return within_rows(len2).index_select(0, f_index_);
}

void SkinList::compact(const at::Tensor& positions, EdgeTopology* topo, std::vector<RadialPairs>* pairs,
                       at::Tensor* v64) {
  if (scans_.defined()) return compact_cuda(positions, topo, pairs, v64);
  compact_reference(positions, topo, pairs, v64);
}

void SkinList::compact_reference(const at::Tensor& positions, EdgeTopology* topo, std::vector<RadialPairs>* pair_chunks,
                                 at::Tensor* v64) {
  if (blocks_.size() > 1) return compact_blocks(positions, topo, pair_chunks, v64);
  RadialPairs* pairs = pair_chunks && !pair_chunks->empty() ? &pair_chunks->front() : nullptr;
  const at::Tensor full = vectors(positions);
  const int64_t F = f_send_.size(0), B = topo->padded_edges, A = topo->padded_atoms, N = nlocal_;
  const auto i64 = f_send_.options();
  const at::Tensor len2 = (full * full).sum(1);
  const at::Tensor m = within_edges(len2);
  const at::Tensor cx = prefix(m.to(at::kLong));  // [F + 1]
  const at::Tensor count = cx.narrow(0, F, 1);
  const at::Tensor D = at::clamp_min(B - count, 0);
  // Padding edges before row r: floor(r D / N), r = 0..N.
  const at::Tensor P = at::div(at::arange(N + 1, i64) * D, N, "floor");
  const at::Tensor rp = cx.index_select(0, f_row_ptr_) + P;  // compacted row pointers [N + 1]
  const at::Tensor dump = at::full({1}, B, i64);
  at::Tensor pos = cx.narrow(0, 0, F) + P.index_select(0, f_recv_);
  pos = at::where(m & (pos < B), pos, dump);
  at::Tensor src = at::full({B + 1}, F, i64);
  src.index_put_({pos}, at::arange(F, i64));
  src = src.narrow(0, 0, B);
  const at::Tensor real = src < F, srcc = at::clamp_max(src, F - 1);
  const at::Tensor slot = at::arange(B, i64);
  const at::Tensor recv = at::clamp(at::searchsorted(rp, slot, /*out_int32=*/false, /*right=*/true) - 1, 0, N - 1);
  const at::Tensor send = at::where(real, f_send_.index_select(0, srcc), recv);
  at::Tensor far = at::zeros({1, 3}, full.options());
  far.select(1, 0).fill_(4.0 * cutoff_ + 10.0);
  v64->copy_(at::where(real.unsqueeze(1), full.index_select(0, srcc), far));
  topo->sender.copy_(send);
  topo->receiver.copy_(recv);
  if (topo->z_sender.defined()) {
    topo->z_sender.copy_(z_node_.index_select(0, send));
    topo->z_receiver.copy_(z_node_.index_select(0, recv));
  }
  topo->sender_slot.copy_(slot_node_.index_select(0, send));
  topo->chunk_rows.front().copy_(recv);
  topo->chunk_row_ptr.front().copy_(rp);

  const bool sender_csr = !topo->chunk_senders.empty(), sums = topo->sender_order.defined();
  if (sender_csr || sums) {
    // Sender order: the listed edges' (stable), filtered by the mask; each owned atom's padding
    // edges after its real ones.
    const at::Tensor ms = m.index_select(0, f_sender_order_).to(at::kLong);
    const at::Tensor sx = prefix(ms);
    const at::Tensor Ps = P.index_select(0, at::clamp_max(at::arange(A + 1, i64), N));
    const at::Tensor sptr = sx.index_select(0, f_sender_ptr_) + Ps;
    at::Tensor spos = sx.narrow(0, 0, F) + Ps.index_select(0, f_sender_sorted_);
    spos = at::where((ms > 0) & (spos < B), spos, dump);
    at::Tensor perm = at::zeros({B + 1}, i64);
    perm.index_put_({spos}, pos.index_select(0, f_sender_order_));
    at::Tensor ppos = sptr.index_select(0, recv + 1) - rp.index_select(0, recv + 1) + slot;
    ppos = at::where(~real & (ppos >= 0) & (ppos < B), ppos, dump);
    perm.index_put_({ppos}, slot);
    perm = perm.narrow(0, 0, B);
    if (sender_csr) {
      topo->chunk_senders.front().perm.copy_(perm);
      topo->chunk_senders.front().ptr.copy_(sptr);
    }
    if (sums) {
      topo->sender_order.copy_(perm);
      topo->sender_ptr.copy_(sptr);
      topo->sender_counts.copy_(sptr.diff());
      const at::Tensor rptr = at::cat({rp, at::full({A - N}, B, i64)});
      topo->receiver_ptr.copy_(rptr);
      topo->receiver_counts.copy_(rptr.diff());
    }
  }

  at::Tensor rows_overflow = at::zeros({1}, i64);
  if (pairs) {
    const int64_t U = pairs->rows;
    const at::Tensor mrow = within_rows(len2);
    const at::Tensor crow = prefix(mrow.to(at::kLong));
    const int64_t Uf = f_first_.size(0);
    const at::Tensor used = crow.narrow(0, Uf, 1);  // real rows
    const at::Tensor rdump = at::full({1}, U, i64);
    at::Tensor rowpos = at::where(mrow & (crow.narrow(0, 0, Uf) < U), crow.narrow(0, 0, Uf), rdump);
    // Every padding edge reads one shared row after the real ones (their vectors, hence their
    // radial features, are all the same; their length gradients are exact zeros).
    const at::Tensor index = at::where(real, rowpos.index_select(0, f_index_.index_select(0, srcc)), used);
    pairs->index.copy_(at::clamp_max(index, U - 1));
    at::Tensor first = at::zeros({U + 1}, i64), second = at::full({U + 1}, -1, i64);
    const at::Tensor pos_ext = at::cat({pos, dump});  // (-1 partners read the dump slot)
    first.index_put_({rowpos}, pos.index_select(0, f_first_));
    const at::Tensor partner = pos_ext.index_select(0, at::where(f_second_ >= 0, f_second_, at::full({1}, F, i64)));
    second.index_put_({rowpos}, at::where((f_second_ >= 0) & (partner < B), partner, at::full({1}, -1, i64)));
    // (the shared row reads the first padding edge)
    const at::Tensor pad = (~real).to(at::kLong).argmax().reshape({1});
    first.index_put_({at::where((~real).index_select(0, pad) & (used < U), used, rdump)}, pad);
    pairs->first.copy_(first.narrow(0, 0, U));
    pairs->second.copy_(second.narrow(0, 0, U));
    pairs->share.copy_(at::where(real.unsqueeze(1), f_share_.index_select(0, srcc), at::ones({1, 1}, f_share_.options())));
    rows_overflow = (used + 1 > U).to(at::kLong);
  }
  // [overflow, smallest squared length within the cutoff, non-finite position components]
  const at::Tensor closest = at::where(m, len2, at::full({1}, 1e300, len2.options())).min().reshape({1});
  const at::Tensor non_finite = (~at::isfinite(positions)).sum().to(at::kDouble).reshape({1});
  status_.copy_(at::cat({((count > B).to(at::kLong) + rows_overflow).to(at::kDouble), closest, non_finite}));
}

#if FLASHMACE_CUDA_KERNELS
namespace {

int64_t* ptr(const at::Tensor& t) { return t.defined() ? t.data_ptr<int64_t>() : nullptr; }

}  // namespace
#endif

void SkinList::compact_cuda(const at::Tensor& positions, EdgeTopology* topo, std::vector<RadialPairs>* pair_chunks,
                            at::Tensor* v64) {
#if FLASHMACE_CUDA_KERNELS
  const bool several = blocks_.size() > 1;
  const bool sender_csr = !topo->chunk_senders.empty(), sums = topo->sender_order.defined();
  const at::Tensor x = positions.contiguous();
  const c10::cuda::CUDAGuard guard(x.device());
  void* stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  for (std::size_t k = 0; k < blocks_.size(); ++k) {
    const Block& b = blocks_[k];
    const int64_t L = b.list1 - b.list0;
    // The block's pairing of its listed edges (one block: the list's), and its chunk's pairs.
    RadialPairs* pairs = pair_chunks && !pair_chunks->empty() ? &(*pair_chunks)[k] : nullptr;
    const at::Tensor p_index = several ? b.list_pairs.index : f_index_, p_first = several ? b.list_pairs.first : f_first_,
                     p_second = several ? b.list_pairs.second : f_second_, p_share = several ? b.list_pairs.share : f_share_;
    if (pairs && !p_first.defined()) {  // (no listed edge in the block: every slot reads row 0)
      pairs->index.zero_();
      pairs->first.zero_();
      pairs->second.fill_(-1);
      pairs->share.fill_(1);
      pairs = nullptr;
    }
    const int64_t rows = pairs ? p_first.size(0) : 0;
    auto fill = [&](auto* c) {
      c->F = L;
      c->N = b.nrows;
      c->row0 = b.row0;
      c->A = topo->padded_atoms;
      c->B = b.bucket;
      c->ntotal = x.size(0);
      c->cutoff2 = cutoff_ * cutoff_;
      c->far = 4.0 * cutoff_ + 10.0;
      c->positions = x.data_ptr<double>();
      c->shift = shift_.data_ptr<double>() + 3 * b.list0;
      c->receiver = ptr(f_recv_) + b.list0;
      c->sender = ptr(f_send_) + b.list0;
      c->row_ptr = ptr(several ? b.row_ptr : f_row_ptr_);
      c->z_node = ptr(z_node_);
      c->slot_node = ptr(slot_node_);
      int64_t* scans = ptr(scans_);
      c->edge_scan = scans;
      if (sender_csr || (sums && !several)) {
        c->sender_rank = ptr(several ? b.sender_rank : f_sender_rank_);
        c->sender_row_ptr = ptr(several ? b.sender_ptr : f_sender_ptr_);
        c->sender_scan = scans + (L + 1);
      }
      c->scan_temp = scan_temp_.data_ptr();
      c->scan_temp_bytes = static_cast<std::size_t>(scan_temp_.numel());
      c->words = reinterpret_cast<unsigned long long*>(words_.data_ptr<int64_t>());
      c->vectors = v64->data_ptr<double>() + 3 * b.offset;
      c->out_sender = ptr(topo->sender) + b.offset;
      c->out_receiver = ptr(topo->receiver) + b.offset;
      if (topo->z_sender.defined()) {
        c->z_sender = ptr(topo->z_sender) + b.offset;
        c->z_receiver = ptr(topo->z_receiver) + b.offset;
      }
      c->sender_slot = ptr(topo->sender_slot) + b.offset;
      c->chunk_rows = ptr(topo->chunk_rows[k]);
      c->chunk_row_ptr = ptr(topo->chunk_row_ptr[k]);
      if (sender_csr) {
        c->sender_perm[0] = ptr(topo->chunk_senders[k].perm);
        c->sender_ptr_out[0] = ptr(topo->chunk_senders[k].ptr);
      }
      if (sums && !several) {
        c->sender_perm[1] = ptr(topo->sender_order);
        c->sender_ptr_out[1] = ptr(topo->sender_ptr);
        c->sender_counts = ptr(topo->sender_counts);
        c->receiver_ptr = ptr(topo->receiver_ptr);
        c->receiver_counts = ptr(topo->receiver_counts);
      }
      c->status = status_.data_ptr<double>();
      c->status_adds = k > 0;
    };
    AT_DISPATCH_FLOATING_TYPES(p_share.defined() ? p_share.scalar_type() : at::kDouble, "skin_compaction", [&] {
      SkinCompaction<scalar_t> c;
      fill(&c);
      if (pairs) {
        c.rows = rows;
        c.bucket_rows = pairs->rows;
        c.pair_index = ptr(p_index);
        c.pair_first = ptr(p_first);
        c.pair_second = ptr(p_second);
        c.pair_share = p_share.data_ptr<scalar_t>();
        c.row_scan = ptr(scans_) + (L + 1) + (c.sender_scan ? L + 1 : 0);  // (the masks side by side)
        c.pair_index_out = ptr(pairs->index);
        c.pair_first_out = ptr(pairs->first);
        c.pair_second_out = ptr(pairs->second);
        c.pair_share_out = pairs->share.data_ptr<scalar_t>();
      }
      skin_compaction_cuda(c, stream);
    });
  }
  if (several) atom_sums_order(topo);
#else
  (void)positions, (void)topo, (void)pair_chunks, (void)v64;
  throw Error("skin list: built without CUDA kernels");
#endif
}

std::pair<int64_t, int64_t> SkinList::closest_edge(const at::Tensor& full) const {
  const at::Tensor len2 = at::where(within(full), (full * full).sum(1), at::full({1}, 1e300, full.options()));
  const int64_t e = len2.argmin().item<int64_t>();
  return {f_send_[e].item<int64_t>(), f_recv_[e].item<int64_t>()};
}

}  // namespace flashmace
