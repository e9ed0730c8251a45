#pragma once
// Edges that share one radial-MLP evaluation. An edge s -> r with vector v and its reverse r -> s
// with vector -v (both present when both atoms are owned, or in a periodic single domain) have the
// same length, so the same radial features and radial-MLP output, bit for bit: the MLP runs once per
// pair. In the backward pass the pair's MLP gradient is the sum of both edges' gradients, and its
// distance gradient goes half to each edge: both edges join the same two atoms along +-v, so forces,
// virial and per-atom virials (each edge split half to each end) are those of the unshared
// evaluation, up to rounding. Pairs are found by exact comparison of (atoms, +-v), never by
// tolerance. Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include <vector>

namespace flashmace {

struct RadialPairs {
  at::Tensor index;   // [E] int64: each edge's row of the shared radial tables
  at::Tensor first;   // [U] int64: the edge whose radial features row u uses (the lower edge index)
  at::Tensor second;  // [U] int64: the other edge of the pair, or -1
  at::Tensor share;   // [E, 1] model dtype: 0.5 for an edge of a pair, 1 for an unpaired edge
  int64_t rows = 0;   // U
};

// sender, receiver [E] int64 and vectors [E, 3] float64 of one chunk of edges (indices within it
// are edge positions in the chunk); `dtype` is the model's. One device->host copy (the row count).
RadialPairs pair_reverse_edges(const at::Tensor& sender, const at::Tensor& receiver, const at::Tensor& vectors,
                               at::ScalarType dtype);

// `pairs` with `rows` (>= pairs.rows) shared rows: the extra rows read edge 0's features and no edge
// reads them, so a captured step (step_graph.h) can keep its row count while the pairing changes a
// little. Returns `pairs` itself when the counts are equal.
RadialPairs pad_pair_rows(const RadialPairs& pairs, int64_t rows);

// Copies `from` into `to`'s tensors (the same sizes), which keep their storage (a captured step reads it).
void copy_pairs_keeping_storage(RadialPairs& to, const RadialPairs& from);

// The pairs of chunks of one graph's edges, kept while that graph lasts (an MD run between
// neighbour-list builds): reused when the edges (senders, receivers, chunking) are those of the last
// call and every pair's vectors are still exact negations of each other, which costs one small
// check and one device->host copy per call instead of the pairing's sort.
class RadialPairCache {
 public:
  struct Chunk {
    int64_t begin = 0, count = 0;
    bool paired = false;  // false: no pairs for this chunk (RadialPairs left empty)
    bool operator==(const Chunk& o) const { return begin == o.begin && count == o.count && paired == o.paired; }
  };
  // sender, receiver [E] int64, vectors [E, 3] float64, all edges in the chunks' order. edges_id,
  // when >= 0, names the sender/receiver arrays (an EdgeTopology id): the same id as last time
  // promises the same arrays, which are then not compared again.
  const std::vector<RadialPairs>& pairs(const at::Tensor& sender, const at::Tensor& receiver, const at::Tensor& vectors,
                                        const std::vector<Chunk>& chunks, at::ScalarType dtype, int64_t edges_id = -1);
  // Counts the pairings made so far: it changes whenever pairs() returned new pairs.
  int64_t generation() const { return generation_; }

 private:
  // The arrays the pairs were made from, kept only when no edges_id names them (they would add two
  // int64 per edge to what a large system holds).
  at::Tensor sender_, receiver_;
  int64_t edges_ = 0;
  at::Device device_ = at::kCPU;
  std::vector<Chunk> chunks_;
  std::vector<RadialPairs> pairs_;
  at::ScalarType dtype_ = at::kDouble;
  int64_t generation_ = 0;
  int64_t edges_id_ = -1;
};

// [E, K] per edge -> [U, K]: per row, its first edge's values plus its second edge's (in that order,
// so the result is reproducible bit for bit; one kernel on CUDA, pair_rows_kernels.h).
at::Tensor sum_pair_rows(const RadialPairs& pairs, const at::Tensor& per_edge);

}  // namespace flashmace
