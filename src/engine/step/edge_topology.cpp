#include "engine/step/edge_topology.h"

#include <algorithm>
#include <atomic>

#include "core/error.h"
#include "engine/ops/graph_checks.h"
#include "engine/step/atom_order.h"
#include "engine/step/message_stage.h"

namespace flashmace {

namespace {

// Chunks of `chunk` edges over receiver-sorted edges. One chunk covers all owned rows; several read
// their receiver rows at the boundaries (one small device->host copy).
std::vector<EdgeChunk> edge_chunks(const at::Tensor& receiver_sorted, int64_t chunk, int64_t nlocal) {
  const int64_t E = receiver_sorted.size(0);
  std::vector<EdgeChunk> chunks;
  if (E == 0) return chunks;
  if (chunk >= E) return {EdgeChunk{0, E, 0, nlocal}};
  const at::Tensor first = at::arange(0, E, chunk, receiver_sorted.options());
  const at::Tensor last = at::clamp_max(first + (chunk - 1), E - 1);
  const at::Tensor rows = at::stack({receiver_sorted.index_select(0, first), receiver_sorted.index_select(0, last)})
                              .to(at::kCPU)
                              .contiguous();
  const int64_t n = first.size(0);
  const int64_t* r = rows.data_ptr<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    EdgeChunk c;
    c.begin = k * chunk;
    c.count = std::min(chunk, E - c.begin);
    c.row0 = r[k];
    c.nrows = r[n + k] - r[k] + 1;
    chunks.push_back(c);
  }
  return chunks;
}

// Row-aligned chunks (TopologyOptions::row_aligned): blocks of whole receiver rows, each with at most
// `atom_chunk` rows and `edge_chunk` edges, or one row with more edges split into chunks of its own.
// Reads the rows' edge counts on the host (one device->host copy of nlocal counts).
void row_aligned_chunks(const at::Tensor& receiver_sorted, int64_t nlocal, int64_t edge_chunk, int64_t atom_chunk,
                        std::vector<EdgeChunk>* chunks, std::vector<NodeBlock>* blocks) {
  const at::Tensor counts =
      at::bincount(receiver_sorted, {}, nlocal).narrow(0, 0, nlocal).to(at::kCPU, at::kLong).contiguous();
  const int64_t* c = counts.data_ptr<int64_t>();
  int64_t begin = 0;  // first edge of the open block
  NodeBlock b;
  int64_t edges = 0;  // in the open block
  auto close = [&] {
    b.chunk0 = static_cast<int64_t>(chunks->size());
    for (int64_t e = 0; e < edges; e += edge_chunk)
      chunks->push_back(EdgeChunk{begin + e, std::min(edge_chunk, edges - e), b.row0, b.nrows});
    b.nchunks = static_cast<int64_t>(chunks->size()) - b.chunk0;
    blocks->push_back(b);
    begin += edges;
  };
  for (int64_t r = 0; r < nlocal; ++r) {
    if (b.nrows > 0 && (b.nrows >= atom_chunk || edges + c[r] > edge_chunk)) {
      close();
      b = NodeBlock{r, 0, 0, 0};
      edges = 0;
    }
    ++b.nrows;
    edges += c[r];
  }
  if (b.nrows > 0) close();
}

// Blocks of atom_chunk rows over chunks that do not follow them (chunk0 = -1), unless one block holds
// all rows and so owns every chunk.
std::vector<NodeBlock> uniform_blocks(int64_t nlocal, int64_t atom_chunk, int64_t nchunks) {
  std::vector<NodeBlock> blocks;
  for (int64_t a0 = 0; a0 < nlocal; a0 += atom_chunk)
    blocks.push_back(NodeBlock{a0, std::min(atom_chunk, nlocal - a0), -1, 0});
  if (blocks.size() == 1) blocks[0] = NodeBlock{0, nlocal, 0, nchunks};
  return blocks;
}

std::vector<int64_t> group_sizes(const std::vector<SpeciesGroups>& groups) {
  std::vector<int64_t> sizes;
  for (const SpeciesGroups& g : groups) {
    sizes.push_back(-1);  // separator
    sizes.insert(sizes.end(), g.elements.begin(), g.elements.end());
    sizes.insert(sizes.end(), g.counts.begin(), g.counts.end());
  }
  return sizes;
}

}  // namespace

int64_t padded_count(int64_t count, int64_t granule) {
  if (count <= 0) return 0;
  int64_t step = std::max<int64_t>(granule, 1);
  while (step * 32 <= count) step *= 2;
  return (count + step - 1) / step * step;
}

at::Tensor receiver_element_key(const at::Tensor& receiver, const at::Tensor& sender, const at::Tensor& species,
                                int64_t num_elements) {
  return receiver * num_elements + species.index_select(0, sender);
}

EdgeTopology EdgeTopology::build(const GraphTensors& caller, int64_t nlocal, const TopologyOptions& o,
                                 const at::Tensor& atomic_numbers, const at::Tensor& positions) {
  static std::atomic<int64_t> builds{0};
  EdgeTopology t;
  t.id = ++builds;
  // The caller's graph in the topology's rows (the caller's arrays stay for matches()).
  GraphTensors g = caller;
  if (o.spatial_bin > 0) {
    if (!positions.defined() || positions.size(0) != caller.species.size(0))
      throw Error("edge topology: a spatial order needs the positions of all " +
                  std::to_string(caller.species.size(0)) + " atoms");
    t.node_order = space_filling_order(positions, nlocal, o.spatial_bin);
    t.node_row = at::empty_like(t.node_order)
                     .index_put_({t.node_order}, at::arange(t.node_order.size(0), t.node_order.options()));
    g.species = caller.species.index_select(0, t.node_order);
    g.sender = t.node_row.index_select(0, caller.sender);
    g.receiver = t.node_row.index_select(0, caller.receiver);
  }
  t.edges = g.sender.size(0);
  t.atoms = g.species.size(0);
  t.nlocal = nlocal;
  t.options = o;
  t.padded_edges = o.padded_edges > 0 ? o.padded_edges : t.edges;
  t.padded_atoms = o.padded_atoms > 0 ? o.padded_atoms : t.atoms;
  const int64_t pad = t.padded_edges - t.edges;
  if (pad < 0 || t.padded_atoms < t.atoms)
    throw Error("edge topology: padded sizes " + std::to_string(t.padded_edges) + " edges, " +
                std::to_string(t.padded_atoms) + " atoms are below the graph's " + std::to_string(t.edges) + ", " +
                std::to_string(t.atoms));
  if (pad > 0 && nlocal < 1) throw Error("edge topology: padding edges needs at least one owned atom");
  if (o.edge_chunk < 1 || o.atom_chunk < 1) throw Error("edge topology: chunk sizes must be positive");

  // Padding edges spread over all owned receivers and all senders: the kernels that walk one row's
  // (or one sender's) edges would otherwise wait for a single row holding all of them.
  at::Tensor receiver = g.receiver, sender = g.sender;
  if (pad > 0) {
    const at::Tensor k = at::arange(pad, g.receiver.options());
    receiver = at::cat({receiver, at::remainder(k, nlocal)});
    sender = at::cat({sender, at::remainder(k, t.atoms)});
  }
  // Edges in (receiver, sender element) order, stable (equal keys keep the caller's order, padding
  // last): the first layer's per-element sums then flush once per element present in a row, not
  // at every change of element along it (species_outer_core.h).
  const auto sorted = at::sort(receiver_element_key(receiver, sender, g.species, atomic_numbers.size(0)),
                               /*stable=*/true, 0, false);
  t.order = std::get<1>(sorted);
  t.receiver = receiver.index_select(0, t.order);
  t.sender = sender.index_select(0, t.order);
  if (o.edge_elements) {
    const at::Tensor z_node = atomic_numbers.index_select(0, g.species);
    t.z_sender = z_node.index_select(0, t.sender);
    t.z_receiver = z_node.index_select(0, t.receiver);
  }

  // Layer 0 indexes its x table by sender element slot: rows of the per-element table for the
  // elements present.
  t.present = t.atoms > 0 ? elements_present(g.species) : std::vector<int64_t>{};
  t.present_index = at::tensor(t.present.empty() ? std::vector<int64_t>{0} : t.present, at::kLong).to(g.species.device());
  const at::Tensor slot_of =
      at::zeros({atomic_numbers.size(0)}, g.species.options())
          .index_put_({t.present_index}, at::arange(t.present_index.size(0), g.species.options()));
  t.sender_slot = slot_of.index_select(0, g.species.index_select(0, t.sender));
  t.species_local = g.species.narrow(0, 0, nlocal).clone();

  if (o.row_aligned) {
    row_aligned_chunks(t.receiver, nlocal, o.edge_chunk, o.atom_chunk, &t.chunks, &t.blocks);
  } else {
    t.chunks = edge_chunks(t.receiver, o.edge_chunk, nlocal);
    t.blocks = uniform_blocks(nlocal, o.atom_chunk, static_cast<int64_t>(t.chunks.size()));
  }
  // One chunk's sender CSR spans every atom (a captured step's compaction refills it in place);
  // several chunks' span only the senders each uses, else they would cost chunks x atoms.
  const bool compact_senders = t.chunks.size() > 1;
  for (const EdgeChunk& ch : t.chunks) {
    t.chunk_rows.push_back(t.receiver.narrow(0, ch.begin, ch.count) - ch.row0);
    t.chunk_row_ptr.push_back(row_pointer(t.chunk_rows.back(), ch.nrows));
    if (!o.sender_csr) continue;
    const at::Tensor senders = t.sender.narrow(0, ch.begin, ch.count);
    t.chunk_senders.push_back(compact_senders ? xindex_csr_compact(senders) : xindex_csr(senders, t.padded_atoms));
  }
  if (o.atom_sums) {
    const XIndexCsr s = xindex_csr(t.sender, t.padded_atoms);
    t.sender_order = s.perm;
    t.sender_ptr = s.ptr;
    t.sender_counts = s.ptr.diff();
    t.receiver_counts = at::bincount(t.receiver, {}, t.padded_atoms);
    t.receiver_ptr = at::cat({at::zeros({1}, t.receiver_counts.options()), at::cumsum(t.receiver_counts, 0)});
  }
  // (the owned atoms' elements are among all atoms' ones; groups of absent elements come out empty)
  const std::vector<int64_t> present_local = nlocal > 0 ? t.present : std::vector<int64_t>{};
  for (const NodeBlock& b : t.blocks)
    t.atom_groups.push_back(group_species(t.species_local.narrow(0, b.row0, b.nrows), present_local));

  // What matches() compares with: a padded topology (a graph-replayed step, small) keeps copies of the
  // caller's senders and receivers, so that a step's check is one comparison; others hold none (16
  // bytes per edge) and compare through the order.
  t.species_in_ = caller.species.clone();
  if (pad > 0) {
    t.sender_in_ = caller.sender.clone();
    t.receiver_in_ = caller.receiver.clone();
  }
  return t;
}

EdgeTopology EdgeTopology::bucket(const at::Tensor& species, int64_t nlocal, int64_t edges, const TopologyOptions& o,
                                  const std::vector<RowBlock>& row_blocks) {
  static std::atomic<int64_t> buckets{0};
  EdgeTopology t;
  t.id = -(++buckets);  // (never equal to a build()'s)
  t.edges = edges;
  t.atoms = species.size(0);
  t.nlocal = nlocal;
  t.options = o;
  t.padded_edges = o.padded_edges;
  t.padded_atoms = std::max(o.padded_atoms, t.atoms);
  const std::vector<RowBlock> parts = row_blocks.empty() ? std::vector<RowBlock>{{0, nlocal, t.padded_edges}} : row_blocks;
  int64_t rows = 0, slots = 0;
  bool fits = nlocal >= 1 && t.padded_edges >= edges && (parts.size() == 1 ? !o.row_aligned : o.row_aligned);
  for (const RowBlock& b : parts) {
    fits = fits && b.row0 == rows && b.nrows >= 1 && b.nrows <= o.atom_chunk && b.bucket <= o.edge_chunk;
    rows += b.nrows;
    slots += b.bucket;
  }
  if (!fits || rows != nlocal || slots != t.padded_edges)
    throw Error("edge topology: a bucket needs owned atoms, room for its " + std::to_string(edges) +
                " edges, and blocks of consecutive rows within one edge chunk and one node block each");
  const auto i64 = species.options();
  const int64_t B = t.padded_edges, A = t.padded_atoms;
  t.order = at::arange(B, i64);
  for (at::Tensor* x : {&t.sender, &t.receiver, &t.sender_slot}) *x = at::zeros({B}, i64);
  if (o.edge_elements)
    for (at::Tensor* x : {&t.z_sender, &t.z_receiver}) *x = at::zeros({B}, i64);
  t.present = t.atoms > 0 ? elements_present(species) : std::vector<int64_t>{};
  t.present_index = at::tensor(t.present.empty() ? std::vector<int64_t>{0} : t.present, at::kLong).to(species.device());
  t.species_local = species.narrow(0, 0, nlocal).clone();
  int64_t begin = 0;
  for (const RowBlock& b : parts) {
    t.blocks.push_back(NodeBlock{b.row0, b.nrows, static_cast<int64_t>(t.chunks.size()), 1});
    t.chunks.push_back(EdgeChunk{begin, b.bucket, b.row0, b.nrows});
    t.chunk_rows.push_back(at::zeros({b.bucket}, i64));
    t.chunk_row_ptr.push_back(at::zeros({b.nrows + 1}, i64));
    if (o.sender_csr) t.chunk_senders.push_back(XIndexCsr{at::zeros({b.bucket}, i64), at::zeros({A + 1}, i64), {}});
    t.atom_groups.push_back(group_species(t.species_local.narrow(0, b.row0, b.nrows), t.present));
    begin += b.bucket;
  }
  if (o.atom_sums) {
    t.sender_order = at::zeros({B}, i64);
    t.sender_ptr = at::zeros({A + 1}, i64);
    t.sender_counts = at::zeros({A}, i64);
    t.receiver_ptr = at::zeros({A + 1}, i64);
    t.receiver_counts = at::zeros({A}, i64);
  }
  return t;
}

bool EdgeTopology::matches(const GraphTensors& g, int64_t nlocal_in, const TopologyOptions& o) const {
  if (!species_in_.defined() || !(o == options) || nlocal_in != nlocal) return false;
  if (g.species.size(0) != atoms || g.sender.size(0) != edges || g.receiver.size(0) != edges) return false;
  if (g.species.device() != species_in_.device() || g.sender.device() != species_in_.device()) return false;
  if (sender_in_.defined())
    return all_equal({{g.species, species_in_}, {g.sender, sender_in_}, {g.receiver, receiver_in_}});
  // Unpadded: order is a permutation of the caller's edges, node_row one of its nodes, so the caller's
  // arrays are the same exactly when they land on the sorted ones. (The caller's indices are below
  // the atom count, as those of the graph this was built from.)
  auto rows = [&](const at::Tensor& x) { return node_row.defined() ? node_row.index_select(0, x) : x; };
  return all_equal({{g.species, species_in_},
                    {rows(g.sender.index_select(0, order)), sender},
                    {rows(g.receiver.index_select(0, order)), receiver}});
}

bool EdgeTopology::same_shape(const EdgeTopology& o) const {
  return padded_edges == o.padded_edges && padded_atoms == o.padded_atoms && nlocal == o.nlocal &&
         options == o.options && chunks == o.chunks && blocks == o.blocks && present == o.present &&
         group_sizes(atom_groups) == group_sizes(o.atom_groups) && sender_rows() == o.sender_rows();
}

std::vector<int64_t> EdgeTopology::sender_rows() const {
  std::vector<int64_t> rows;
  for (const XIndexCsr& c : chunk_senders) rows.push_back(c.ptr.size(0) - 1);
  return rows;
}

std::vector<at::Tensor*> EdgeTopology::device_tensors() {
  std::vector<at::Tensor*> t{&sender, &receiver, &present_index, &sender_slot, &species_local};
  if (z_sender.defined()) t.insert(t.end(), {&z_sender, &z_receiver});
  for (auto& r : chunk_rows) t.push_back(&r);
  for (auto& r : chunk_row_ptr) t.push_back(&r);
  for (auto& c : chunk_senders) {
    t.push_back(&c.perm);
    t.push_back(&c.ptr);
    if (c.rows.defined()) t.push_back(&c.rows);
  }
  for (auto& g : atom_groups)
    for (at::Tensor* s : {&g.element_index, &g.batched_rows, &g.place})
      if (s->defined()) t.push_back(s);
  for (at::Tensor* s :
       {&receiver_counts, &sender_counts, &receiver_ptr, &sender_ptr, &sender_order, &node_order, &node_row})
    if (s->defined()) t.push_back(s);
  return t;
}

void EdgeTopology::assign_keeping_storage(const EdgeTopology& other) {
  if (!same_shape(other)) throw Error("edge topology: assign_keeping_storage needs a topology of the same shape");
  std::vector<at::Tensor> kept;
  for (at::Tensor* p : device_tensors()) kept.push_back(*p);
  *this = other;
  const std::vector<at::Tensor*> now = device_tensors();
  for (std::size_t i = 0; i < now.size(); ++i) {
    kept[i].copy_(*now[i]);
    *now[i] = kept[i];
  }
}

}  // namespace flashmace
