#pragma once
// A neighbour list with its skin, kept for the many steps between two list builds (LAMMPS rebuilds
// every ~10-20 steps). Its connectivity is sorted by receiver, by sender and paired (reverse edges,
// radial_pairs.h) once per list; every step only positions come in, and the cutoff is applied by
// compaction on the model's device: a mask |v| < r_max (decided per radial pair, so both edges of a
// pair agree), exclusive scans of it in receiver order, in sender order and over the pair rows, and
// scatters into a bucket of fixed size. The compacted topology and pairs keep the shapes and
// addresses that a captured CUDA graph reads, so nothing is sorted, counted on the host or
// recaptured on a step between list builds. On CUDA the compaction is one fused pass of three
// kernels and three scans (kernels/skin_compaction_kernels.h); the ATen formulation
// (compact_reference) is the CPU's path and the kernels' reference.
//
// The bucket holds the edges within the cutoff plus padding: the padding edges sit at the end of
// the receiver rows, spread evenly over them (row r gets floor((r+1)D/N) - floor(rD/N) of the D),
// as self-edges with a vector beyond every cutoff (exact zeros), all reading one shared pair row.
// When more edges come within the cutoff than the bucket holds, status() says so on the device
// and the caller builds a larger bucket before the step (one flag read per step).
//
// A list too large for one edge chunk (or one node block) of the memory plan is cut into blocks of
// whole receiver rows, each at most atom_chunk rows with a bucket of at most edge_chunk edges: each
// block compacts into its own chunk of the bucket, with its own padding, and pairs the reverse
// edges inside it (a pair split between blocks is two single rows). On CUDA each block takes the
// fused pass and the per-atom sums' order over all chunks follows in ATen; their steps are not
// captured (large systems: few launches per edge).
// Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include <memory>
#include <utility>
#include <vector>

#include "engine/ops/radial_pairs.h"
#include "engine/step/edge_topology.h"

namespace c10::cuda {
struct CUDAEvent;
}

namespace flashmace {

// A neighbour list of one domain: species [ntotal], sender/receiver [F] (receivers < nlocal),
// image [F, 3] int32 lattice offsets of each sender's image, all on one device.
struct ListTensors {
  GraphTensors graph;
  at::Tensor image;
  int64_t nlocal = 0;
};

// The first node with a non-finite position: throws NonFinitePositionError (positions [ntotal, 3]);
// nothing when all are finite. One host synchronisation.
void check_finite_positions(const at::Tensor& positions);

// The listed edges within `cutoff` and their vectors (one host synchronisation), for the paths that
// do not compact on the device. Throws NonFinitePositionError, and TooCloseError for an edge shorter
// than min_distance.
struct EdgesWithin {
  GraphTensors graph;
  at::Tensor vectors;
};
EdgesWithin edges_within(const ListTensors& list, const at::Tensor& positions, const at::Tensor& cell, double cutoff,
                         double min_distance);

// x[receiver] - x[sender] - image . cell, float64, computed as (x_r - x_s) - ((n_a a + n_b b) + n_c c)
// so that an edge and its reverse (image negated) get exact negatives. positions [ntotal, 3],
// cell [3, 3] rows a, b, c, both float64 on the list's device.
at::Tensor list_vectors(const at::Tensor& positions, const at::Tensor& cell, const at::Tensor& sender,
                        const at::Tensor& receiver, const at::Tensor& image);

// The bucket for `count` edges (or pair rows) within the cutoff at a list build, with headroom
// (0..3: count / 128 doubled that many times; raised after overflows); `previous` (the last list's,
// 0: none) when it still fits well.
int64_t skin_bucket(int64_t count, int64_t previous = 0, int headroom = 0);

class SkinList {
 public:
  // Sorts and pairs the list, and sizes the buckets from the edges within `cutoff` at `positions`
  // and `cell` (with headroom). options: the compacted topology's (its edge_chunk and atom_chunk
  // decide the blocks; padded_edges, padded_atoms and row_aligned are set here); pairs: whether the
  // compacted step shares radial rows; previous: the last list's edge and row buckets (kept when
  // they still fit) and headroom: the buckets' (skin_bucket). blocks() == 0: one receiver row has
  // more edges than a chunk holds (the caller takes another path).
  static SkinList build(const ListTensors& list, const at::Tensor& positions, const at::Tensor& cell, double cutoff,
                        TopologyOptions options, bool pairs, at::ScalarType dtype, const at::Tensor& atomic_numbers,
                        const std::pair<int64_t, int64_t>& previous = {0, 0}, int headroom = 0);

  // The lattice offsets times a new cell [3, 3] (in place: a captured compaction reads them).
  void set_cell(const at::Tensor& cell);
  // The vectors of every listed edge in receiver order [F, 3] float64, from positions [ntotal, 3]
  // and the last set_cell().
  at::Tensor vectors(const at::Tensor& positions) const;

  // Compacts: the listed edges within the cutoff at `positions` into `topo` and `pairs` (the
  // shapes of `topology` and `pairs` below, one per chunk or none: their tensors are rewritten in
  // place, their storage kept) and their vectors into `v64` [bucket, 3]; writes status(). On CUDA
  // one fused pass per block (kernels/skin_compaction_kernels.h), else compact_reference().
  void compact(const at::Tensor& positions, EdgeTopology* topo, std::vector<RadialPairs>* pairs, at::Tensor* v64);
  // The same in ATen operations: the CPU's path, and the CUDA kernels' reference in the tests.
  void compact_reference(const at::Tensor& positions, EdgeTopology* topo, std::vector<RadialPairs>* pairs,
                         at::Tensor* v64);
  int64_t blocks() const { return static_cast<int64_t>(blocks_.size()); }

  // [3] float64 on the device, written by compact(): [0] > 0 when the edges or pair rows within the
  // cutoff outgrew the buckets (the outputs are then invalid), [1] the smallest squared length
  // within the cutoff, [2] the number of non-finite position components.
  const at::Tensor& status() const { return status_; }
  // Starts copying status() to the host behind the compaction (CUDA: into pinned memory, with an
  // event), so that the step can be queued before the host reads it; host_status() waits for that
  // copy only, not for the work queued after it.
  void request_status();
  at::Tensor host_status();
  int64_t listed_edges() const { return f_send_.size(0); }
  // The edges (receiver order) with the smallest length within the cutoff: its sender and receiver.
  std::pair<int64_t, int64_t> closest_edge(const at::Tensor& full) const;

  // What compact() writes into: a topology of the bucket's shape (an edge chunk per block) and its
  // pairs (per chunk a RadialPairs with a bucket of rows, or none).
  EdgeTopology topology;
  std::vector<RadialPairs> pairs;
  // With pairs: the radial rows (pairs and single edges) within the cutoff at the build, and those
  // edges (before the buckets' headroom).
  int64_t pair_rows = 0, edges_within = 0;

 private:
  // A block of receiver rows [row0, row0 + nrows): listed edges [list0, list1) (receiver order),
  // compacted into [offset, offset + bucket); with pairs, its pairing of those edges (indices
  // within them).
  struct Block {
    int64_t row0 = 0, nrows = 0, list0 = 0, list1 = 0, offset = 0, bucket = 0;
    RadialPairs list_pairs;
    // CUDA, several blocks: its row pointers from 0 [nrows + 1], each edge's place in the block's
    // sender order [list1 - list0] and that order's pointers over the padded atoms.
    at::Tensor row_ptr, sender_rank, sender_ptr;
  };
  // (within: [F] bool, the listed edges within the cutoff at the list build)
  void build_blocks(const at::Tensor& full, const at::Tensor& within, TopologyOptions options, bool pairs,
                    at::ScalarType dtype, const at::Tensor& species);
  // compact_reference() block by block (several blocks): memory in proportion to a block's edges,
  // the previous list's buckets not reused (no captured step reads them).
  void compact_blocks(const at::Tensor& positions, EdgeTopology* topo, std::vector<RadialPairs>* pairs, at::Tensor* v64);
  void compact_block_pairs(const Block& b, const at::Tensor& len2, const at::Tensor& pos, const at::Tensor& real,
                           const at::Tensor& src, RadialPairs* out, at::Tensor* overflow) const;
  at::Tensor within(const at::Tensor& full) const;        // [F] bool
  at::Tensor within_edges(const at::Tensor& len2) const;  // [F] bool from the squared lengths
  at::Tensor within_rows(const at::Tensor& len2) const;   // [pair rows] bool, by each row's first edge
  void compact_cuda(const at::Tensor& positions, EdgeTopology* topo, std::vector<RadialPairs>* pairs, at::Tensor* v64);
  // The per-atom sums' sender and receiver order over every chunk (several blocks), from the
  // compacted senders and receivers.
  static void atom_sums_order(EdgeTopology* topo);

  double cutoff_ = 0;
  int64_t nlocal_ = 0;
  at::Tensor f_order_;                // [F] the caller's edge index of each edge in receiver order
  at::Tensor f_recv_, f_send_;        // [F] in receiver order
  at::Tensor f_image_;                // [F, 3] float64
  at::Tensor shift_;                  // [F, 3] f_image_ times the cell
  at::Tensor f_row_ptr_;              // [nlocal + 1]
  // (the three below: one block only; several blocks sort their compacted senders per step)
  at::Tensor f_sender_order_;         // [F] receiver-order edges sorted by sender (stable)
  at::Tensor f_sender_sorted_;        // [F] their senders
  at::Tensor f_sender_ptr_;           // [padded atoms + 1]
  at::Tensor f_index_, f_first_, f_second_, f_share_;  // the pairing of all listed edges (or undefined)
  at::Tensor z_node_, slot_node_;     // [ntotal] atomic number and element slot of each node
  at::Tensor status_;
  // The fused CUDA pass's own: each edge's place in the sender order [F], the scans' buffers
  // [F + 1 | F + 1 | pair rows + 1] (several blocks: the largest block's), CUB's temporary bytes,
  // two reset words.
  at::Tensor f_sender_rank_, scans_, scan_temp_, words_;
  std::vector<Block> blocks_;
  at::Tensor status_host_;                      // [3] (CUDA: pinned)
  std::shared_ptr<c10::cuda::CUDAEvent> copied_;  // (CUDA: the status copy's completion)
};

}  // namespace flashmace
