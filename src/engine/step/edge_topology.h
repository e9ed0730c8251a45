#pragma once
// What the fast engine derives from a graph's connectivity alone, without positions: the receiver
// order, the edge chunks with their CSR row pointers, each chunk's sender CSR, the elements present
// and the species groups of the atom chunks. LAMMPS keeps one neighbour list for many steps, so this
// is built once per list (sorts, counts, several host synchronisations) and reused while species,
// senders and receivers stay the same (one comparison and one host synchronisation per step).
//
// For CUDA-graph replay (step_graph.h) the edge and atom arrays can be padded to a bucket: padding
// edges k = 0, 1, ... run from atom k mod atoms to owned atom k mod nlocal, sorted in with the real
// ones, and get a vector longer than every cutoff from the engine, so they contribute exact zeros;
// padding atoms have no edges.
// A topology of the same shape (same padded sizes, chunks, elements and group sizes) can then be
// copied into the tensors a captured graph reads.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "engine/ops/conv_tp_op.h"
#include "engine/ops/species_linear.h"
#include "model/mace_forward.h"

namespace flashmace {

// One chunk of edges [begin, begin + count) in receiver order, with the receiver rows it touches.
struct EdgeChunk {
  int64_t begin = 0, count = 0;
  int64_t row0 = 0, nrows = 0;
  bool operator==(const EdgeChunk& o) const {
    return begin == o.begin && count == o.count && row0 == o.row0 && nrows == o.nrows;
  }
};

// Owned atoms [row0, row0 + nrows) whose node work runs together. Row-aligned topologies give each
// block its own edge chunks [chunk0, chunk0 + nchunks): exactly the edges into its rows, so a block's
// message sums are complete once its chunks ran (nchunks = 0: no edges into the block; chunk0 = -1:
// the chunks do not follow the blocks).
struct NodeBlock {
  int64_t row0 = 0, nrows = 0;
  int64_t chunk0 = 0, nchunks = 0;
  bool operator==(const NodeBlock& o) const {
    return row0 == o.row0 && nrows == o.nrows && chunk0 == o.chunk0 && nchunks == o.nchunks;
  }
};

struct TopologyOptions {
  int64_t edge_chunk = 1;       // edges per chunk (the memory plan's)
  int64_t atom_chunk = 1;       // owned atoms per node block (at most)
  // Chunks end at receiver boundaries and node blocks own their chunks: blocks of whole rows with at
  // most edge_chunk edges (a row with more is split into chunks of its own). Otherwise chunks of
  // edge_chunk edges share their boundary rows, and blocks are atom_chunk rows apart.
  bool row_aligned = false;
  int64_t padded_edges = 0;     // >= the edge count: pad to this many (0: no padding)
  int64_t padded_atoms = 0;     // >= the atom count
  bool edge_elements = true;    // the edges' atomic numbers (read by a distance transform and ZBL)
  bool sender_csr = false;      // build each chunk's sender CSR (layers after the first)
  bool atom_sums = false;       // build the per-atom edge counts and sender order (forces, virials)
  // Owned atoms in the order of space_filling_order (atom_order.h) over the positions given to
  // build(), bins of this many Angstrom (0: the caller's order).
  double spatial_bin = 0;
  bool operator==(const TopologyOptions& o) const {
    return edge_chunk == o.edge_chunk && atom_chunk == o.atom_chunk && row_aligned == o.row_aligned &&
           edge_elements == o.edge_elements && padded_edges == o.padded_edges &&
           padded_atoms == o.padded_atoms && sender_csr == o.sender_csr && atom_sums == o.atom_sums &&
           spatial_bin == o.spatial_bin;
  }
};

// The order edges are kept in: receiver * num_elements + species[sender] (species: element index
// per node, [0, num_elements)).
at::Tensor receiver_element_key(const at::Tensor& receiver, const at::Tensor& sender, const at::Tensor& species,
                                int64_t num_elements);

class EdgeTopology {
 public:
  // graph: species [ntotal], sender/receiver [E] int64 on one device, receivers < nlocal;
  // atomic_numbers [Z] of the model on that device; positions [ntotal, 3] float64 (read only with
  // options.spatial_bin > 0). (padding edges need at least one atom and one owned atom)
  static EdgeTopology build(const GraphTensors& graph, int64_t nlocal, const TopologyOptions& options,
                            const at::Tensor& atomic_numbers, const at::Tensor& positions = {});

  // The shape of a topology for a compaction to fill (skin_list.h): o.padded_edges edges over the
  // nlocal owned rows, in one chunk, or with `blocks` (whole rows, each its own chunk of `bucket`
  // edges, consecutive; o.row_aligned) one chunk per node block. What depends on the species only
  // (elements present, species groups) is computed; the edge arrays are zeros of their sizes, each
  // chunk's sender CSR spans every atom. edges: the real count it holds now.
  struct RowBlock {
    int64_t row0 = 0, nrows = 0, bucket = 0;
  };
  static EdgeTopology bucket(const at::Tensor& species, int64_t nlocal, int64_t edges, const TopologyOptions& options,
                             const std::vector<RowBlock>& blocks = {});

  // Whether this was built from the same connectivity with the same options.
  bool matches(const GraphTensors& graph, int64_t nlocal, const TopologyOptions& options) const;

  // Same sizes, chunks, elements and group sizes: everything a captured step bakes into its launches.
  bool same_shape(const EdgeTopology& other) const;

  // Becomes `other` (same_shape) while keeping its own device tensors, into which other's are copied.
  void assign_keeping_storage(const EdgeTopology& other);

  int64_t edges = 0, atoms = 0;                // real counts
  int64_t padded_edges = 0, padded_atoms = 0;  // array sizes (the real counts without padding)
  int64_t nlocal = 0;
  TopologyOptions options;
  int64_t id = 0;  // unique per build(): equal ids mean the same connectivity

  at::Tensor order;                       // [padded_edges] caller's edge index of each sorted edge (>= edges: padding)
  // With spatial_bin: the caller's node of each of the topology's rows [atoms] and its inverse, the
  // row of each caller's node [atoms]; every node index below is a row (undefined: rows are nodes).
  at::Tensor node_order, node_row;
  at::Tensor sender, receiver;            // [padded_edges] in receiver order
  at::Tensor z_sender, z_receiver;        // [padded_edges] atomic numbers (edge_elements; else undefined)
  std::vector<int64_t> present;           // elements of all atoms (sorted)
  at::Tensor present_index;               // [max(1, present)] on the device
  at::Tensor sender_slot;                 // [padded_edges] position of each sender's element in present
  at::Tensor species_local;               // [nlocal]
  std::vector<EdgeChunk> chunks;          // over padded_edges
  std::vector<at::Tensor> chunk_rows;     // per chunk [count]: receiver minus row0
  std::vector<at::Tensor> chunk_row_ptr;  // per chunk [nrows + 1]
  // Per chunk: its senders' CSR (xindex_csr over padded_atoms rows with one chunk, else
  // xindex_csr_compact over the senders it uses).
  std::vector<XIndexCsr> chunk_senders;
  std::vector<int64_t> sender_rows() const;  // per chunk: its sender CSR's row count
  std::vector<NodeBlock> blocks;          // over the nlocal owned rows
  bool blocks_own_chunks() const { return blocks.empty() || blocks.front().chunk0 >= 0; }
  std::vector<SpeciesGroups> atom_groups; // per block
  // Per-atom sums over all edges (atom_sums): [padded_atoms] edge counts as receiver and as sender,
  // the same as CSR row pointers [padded_atoms + 1], and the sorted edges in sender order (stable),
  // for deterministic per-atom sums (atom_sums.h).
  at::Tensor receiver_counts, sender_counts, receiver_ptr, sender_ptr, sender_order;

 private:
  // the caller's arrays it was built from (copies; senders and receivers only where padded: build())
  at::Tensor species_in_, sender_in_, receiver_in_;
  std::vector<at::Tensor*> device_tensors();
};

// The bucket a count is padded to for graph replay: a multiple of a power of two near count/16
// (at least `granule`), so neighbour-list rebuilds that change the count by a few percent stay in it.
int64_t padded_count(int64_t count, int64_t granule);

}  // namespace flashmace
