// The fast engine's connectivity cache and bucket padding (engine/step/edge_topology.h): a topology is
// reused only for the same species, senders and receivers (a permuted edge list, another structure
// and the first one again each give the fresh engine's answer), and padding edges and atoms to the
// CUDA-graph bucket changes nothing (float64, also on a ghost-atom domain with per-atom virials and
// with several edge chunks), and row-aligned chunks give node blocks that own exactly their rows'
// edges, and a spatial atom order (atom_order.h) renames the atoms consistently and makes blocks of
// nearby atoms. CPU; the graph replay itself is tested under `ctest -L gpu`.
#include <gtest/gtest.h>

#include <cmath>

#include "core/lattice.h"
#include "core/local_graph.h"
#include "core/model_file.h"
#include "engine/step/atom_order.h"
#include "engine/step/edge_topology.h"
#include "engine/host_evaluation.h"
#include "test_support.h"

namespace flashmace {
namespace {

constexpr double kEnergyRelTol = 1e-12;
constexpr double kAbsTol = 1e-10;

std::unique_ptr<Evaluator> fast(const std::string& model, bool pad, int64_t chunk = 0) {
  EngineOptions o;
  o.dtype = Dtype::Float64;
  o.pad_to_bucket = pad;
  o.edge_chunk = o.atom_chunk = chunk;
  return make_evaluator(ModelFile::load(testing::exported_model(model)), o);
}

void expect_same(const Prediction& got, const Prediction& want, const std::string& what) {
  testing::expect_same_prediction(got, want, kEnergyRelTol, kAbsTol, what);
}

TEST(EdgeTopology, ReusedOnlyForTheSameConnectivity) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file("small_l1"));
  const Structure bulk = testing::reference_structure(ref, "bulk"), cluster = testing::reference_structure(ref, "cluster");
  const Graph gb = testing::reference_graph(ref, "bulk"), gc = testing::reference_graph(ref, "cluster");
  const Graph gr = reversed_edges(gb);
  const Prediction want_b = evaluate_structure(*fast("small_l1", false), bulk, gb);
  const Prediction want_r = evaluate_structure(*fast("small_l1", false), bulk, gr);
  const Prediction want_c = evaluate_structure(*fast("small_l1", false), cluster, gc);
  // A stale edge order would pair every edge vector with another edge's senders and receivers.
  ASSERT_GT(testing::max_abs_diff(want_b.forces, std::vector<double>(want_b.forces.size(), 0.0)), 1e-3);
  const auto one = fast("small_l1", false);
  expect_same(evaluate_structure(*one, bulk, gb), want_b, "bulk");
  expect_same(evaluate_structure(*one, bulk, gb), want_b, "bulk again (reused)");
  expect_same(evaluate_structure(*one, bulk, gr), want_r, "reversed edges");
  expect_same(evaluate_structure(*one, cluster, gc), want_c, "cluster");
  expect_same(evaluate_structure(*one, bulk, gb), want_b, "bulk after the cluster");
}

// matches() answers for the arrays' values, not their identity: padded topologies compare with copies
// of the caller's arrays, unpadded ones (no copies) through the edge order and, with a spatial atom
// order, the node order. One changed index anywhere, or two edges swapped, is a new connectivity.
TEST(EdgeTopology, MatchesTellsEveryChangedIndexWithOrWithoutCopies) {
  const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file("small_l1"));
  const Structure s = testing::reference_structure(ref, "bulk");
  const Graph graph = testing::reference_graph(ref, "bulk");
  const int64_t N = s.size(), E = graph.num_edges();
  GraphTensors g;
  std::vector<int64_t> species(static_cast<std::size_t>(N));
  for (int64_t i = 0; i < N; ++i) species[i] = i % 2;
  g.species = at::tensor(species, at::kLong);
  g.sender = at::tensor(graph.sender, at::kLong);
  g.receiver = at::tensor(graph.receiver, at::kLong);
  const at::Tensor x = at::tensor(s.positions, at::kDouble).reshape({N, 3});
  const at::Tensor z = at::tensor(std::vector<int64_t>{28, 29}, at::kLong);
  ASSERT_GT(E, 40);
  for (const bool pad : {false, true})
    for (const double bin : {0.0, 1.5}) {
      const std::string what = std::string(pad ? "padded" : "unpadded") + (bin > 0 ? ", spatial order" : "");
      TopologyOptions o;
      o.edge_chunk = 1 << 30;
      o.atom_chunk = 1 << 30;
      o.padded_edges = pad ? padded_count(E, 1024) : 0;
      o.spatial_bin = bin;
      const EdgeTopology t = EdgeTopology::build(g, N, o, z, x);
      ASSERT_EQ(t.padded_edges > t.edges, pad) << what;
      ASSERT_EQ(t.node_order.defined(), bin > 0) << what;
      GraphTensors same{g.species.clone(), g.sender.clone(), g.receiver.clone()};
      EXPECT_TRUE(t.matches(same, N, o)) << what;
      EXPECT_FALSE(t.matches(same, N - 1, o)) << what;
      for (const int64_t k : {int64_t{0}, E / 2, E - 1}) {
        GraphTensors changed{g.species.clone(), g.sender.clone(), g.receiver.clone()};
        changed.sender[k] = (g.sender[k].item<int64_t>() + 1) % N;
        EXPECT_FALSE(t.matches(changed, N, o)) << what << ": sender of edge " << k;
        changed.sender[k] = g.sender[k];
        changed.receiver[k] = (g.receiver[k].item<int64_t>() + 1) % N;
        EXPECT_FALSE(t.matches(changed, N, o)) << what << ": receiver of edge " << k;
        changed.receiver[k] = g.receiver[k];
        ASSERT_TRUE(t.matches(changed, N, o)) << what;
        changed.species[k % N] = 1 - species[k % N];
        EXPECT_FALSE(t.matches(changed, N, o)) << what << ": species of atom " << k % N;
      }
      // Two edges of different receivers swapped: the same multiset of pairs, another edge order.
      int64_t j = 1;
      while (graph.receiver[j] == graph.receiver[0]) ++j;
      GraphTensors swapped{g.species, g.sender.clone(), g.receiver.clone()};
      for (at::Tensor* a : {&swapped.sender, &swapped.receiver}) {
        const at::Tensor first = (*a)[0].clone();
        (*a)[0] = (*a)[j];
        (*a)[j] = first;
      }
      EXPECT_FALSE(t.matches(swapped, N, o)) << what << ": edges 0 and " << j << " swapped";
    }
}

TEST(EdgeTopology, PaddingToTheBucketChangesNothing) {
  for (const std::string model : {"small_l1", "scalar_l0", "large_l2"}) {
    const SafetensorsFile ref = SafetensorsFile::load(testing::reference_file(model));
    for (const std::string which : {"bulk", "cluster"}) {
      const Structure s = testing::reference_structure(ref, which);
      const Graph g = testing::reference_graph(ref, which);
      ASSERT_NE(padded_count(g.num_edges(), 1024), g.num_edges()) << "the case must need padding";
      for (const int64_t chunk : {int64_t{0}, int64_t{13}})
        expect_same(evaluate_structure(*fast(model, true, chunk), s, g),
                    evaluate_structure(*fast(model, false, chunk), s, g),
                    model + " " + which + " chunk " + std::to_string(chunk));
    }
    // A ghost-atom domain: padded atoms take part in the exchanges' row counts, never in the data.
    const Structure s = testing::reference_structure(ref, "bulk");
    std::vector<int> owner;
    const auto plain = fast(model, false), padded = fast(model, true);
    const LocalGraph lg = periodic_local_graph(s, plain->cutoff(), &owner);
    OwnerMapExchanger exchanger(lg.nlocal, owner);
    const LocalPrediction want = evaluate_local(*plain, lg, &exchanger, true);
    const LocalPrediction got = evaluate_local(*padded, lg, &exchanger, true);
    EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), kEnergyRelTol) << model;
    EXPECT_LE(testing::max_abs_diff(got.forces, want.forces), kAbsTol) << model;
    EXPECT_LE(testing::max_abs_diff(got.atom_virial, want.atom_virial), kAbsTol) << model;
  }
}

TEST(EdgeTopology, BucketsHoldTheCountWithLittlePadding) {
  int64_t previous = 0;
  for (int64_t n = 1; n < 3000000; n = n * 5 / 4 + 1) {
    const int64_t p = padded_count(n, 1024);
    EXPECT_GE(p, n);
    EXPECT_LE(p - n, std::max<int64_t>(1023, n / 16)) << n;
    EXPECT_GE(p, previous) << n;  // monotone: a larger graph never gets a smaller bucket
    previous = p;
  }
  EXPECT_EQ(padded_count(0, 1024), 0);
  // Counts a few percent apart (a neighbour-list rebuild) mostly share a bucket.
  EXPECT_EQ(padded_count(67392, 1024), padded_count(68000, 1024));
}

// Row-aligned chunks (recompute plans): blocks of whole receiver rows, in order and covering every
// owned row once; each block's chunks hold exactly the edges into its rows, at most edge_chunk of
// them, and a block of more than one row stays within edge_chunk edges and atom_chunk rows (a row
// with more edges than edge_chunk is a block of its own, split into several chunks).
TEST(EdgeTopology, RowAlignedBlocksOwnExactlyTheirRowsEdges) {
  // Rows 0..5 with 3, 0, 9, 1, 2, 4 edges (row 1 has none), senders anywhere.
  const std::vector<int64_t> counts{3, 0, 9, 1, 2, 4};
  std::vector<int64_t> receiver;
  for (int64_t r = 0; r < static_cast<int64_t>(counts.size()); ++r) receiver.insert(receiver.end(), counts[r], r);
  const int64_t E = static_cast<int64_t>(receiver.size()), nlocal = 6, ntotal = 8;
  GraphTensors g;
  g.species = at::zeros({ntotal}, at::kLong);
  g.receiver = at::tensor(receiver, at::kLong).flip(0);  // (the caller's order is not the receivers')
  g.sender = at::remainder(at::arange(E, at::kLong) * 5 + 1, ntotal);
  for (const auto& [edge_chunk, atom_chunk] : std::vector<std::pair<int64_t, int64_t>>{{4, 100}, {1, 1}, {7, 2}, {100, 3}}) {
    TopologyOptions o;
    o.edge_chunk = edge_chunk;
    o.atom_chunk = atom_chunk;
    o.row_aligned = true;
    o.sender_csr = true;
    const EdgeTopology t = EdgeTopology::build(g, nlocal, o, at::tensor(std::vector<int64_t>{29}, at::kLong));
    const std::string what = "edge chunk " + std::to_string(edge_chunk) + ", atom chunk " + std::to_string(atom_chunk);
    ASSERT_TRUE(t.blocks_own_chunks()) << what;
    ASSERT_EQ(t.atom_groups.size(), t.blocks.size()) << what;
    int64_t row = 0, chunk = 0, edge = 0;
    for (const NodeBlock& b : t.blocks) {
      EXPECT_EQ(b.row0, row) << what;
      EXPECT_EQ(b.chunk0, chunk) << what;
      int64_t block_edges = 0;
      for (int64_t r = b.row0; r < b.row0 + b.nrows; ++r) block_edges += counts[r];
      if (b.nrows > 1) {
        EXPECT_LE(block_edges, edge_chunk) << what;
        EXPECT_LE(b.nrows, atom_chunk) << what;
      }
      int64_t held = 0;
      for (int64_t k = b.chunk0; k < b.chunk0 + b.nchunks; ++k) {
        const EdgeChunk& ch = t.chunks[k];
        EXPECT_EQ(ch.begin, edge) << what;
        EXPECT_GE(ch.count, 1) << what;
        EXPECT_LE(ch.count, edge_chunk) << what;
        EXPECT_EQ(ch.row0, b.row0) << what;
        EXPECT_EQ(ch.nrows, b.nrows) << what;
        // Every edge of the chunk goes into the block's rows, in receiver order.
        const at::Tensor rows = t.receiver.narrow(0, ch.begin, ch.count);
        EXPECT_GE(rows.min().item<int64_t>(), b.row0) << what;
        EXPECT_LT(rows.max().item<int64_t>(), b.row0 + b.nrows) << what;
        EXPECT_TRUE(at::equal(t.chunk_rows[k], rows - b.row0)) << what;
        // Its sender CSR: over the atoms it uses when there are several chunks, else over all.
        const at::Tensor senders = t.sender.narrow(0, ch.begin, ch.count);
        const XIndexCsr& csr = t.chunk_senders[k];
        const at::Tensor used = std::get<0>(at::_unique(senders, /*sorted=*/true));
        const at::Tensor rows_csr = t.chunks.size() > 1 ? csr.rows : at::arange(t.padded_atoms, at::kLong);
        EXPECT_EQ(csr.rows.defined(), t.chunks.size() > 1) << what;
        EXPECT_TRUE(t.chunks.size() == 1 || at::equal(rows_csr, used)) << what;
        EXPECT_TRUE(at::equal(senders.index_select(0, csr.perm), rows_csr.repeat_interleave(csr.ptr.diff()))) << what;
        edge += ch.count;
        held += ch.count;
      }
      EXPECT_EQ(held, block_edges) << what;
      row += b.nrows;
      chunk += b.nchunks;
    }
    EXPECT_EQ(row, nlocal) << what;
    EXPECT_EQ(chunk, static_cast<int64_t>(t.chunks.size())) << what;
    EXPECT_EQ(edge, E) << what;
  }
}

// A lattice in its generator's order (x slowest) cut into blocks of 256 atoms: each block is a strip
// one cell thick, which most edges leave (58 %); along the space-filling curve a block is a compact
// region and keeps more of its edges inside (those whose reverse can share its radial-MLP row).
// The renaming is consistent: every edge joins the same two atoms, with their elements.
TEST(EdgeTopology, SpatialOrderMakesBlocksOfNearbyAtoms) {
  const Structure s = make_cubic_lattice("fcc", 3.61, 12, {28, 29}, 0.05, 11);  // 6,912 atoms
  const Graph graph = build_neighbor_list(s, 5.0);
  const int64_t N = s.size();
  GraphTensors g;
  std::vector<int64_t> species(static_cast<std::size_t>(N));
  for (int64_t i = 0; i < N; ++i) species[i] = s.atomic_numbers[i] == 28 ? 0 : 1;
  g.species = at::tensor(species, at::kLong);
  g.sender = at::tensor(graph.sender, at::kLong);
  g.receiver = at::tensor(graph.receiver, at::kLong);
  const at::Tensor x = at::tensor(s.positions, at::kDouble).reshape({N, 3});
  const at::Tensor z = at::tensor(std::vector<int64_t>{28, 29}, at::kLong);
  TopologyOptions o;
  o.edge_chunk = 1 << 30;
  o.atom_chunk = 256;
  o.row_aligned = true;
  auto kept_inside = [&](const EdgeTopology& t) {
    const at::Tensor block = at::floor_divide(at::arange(N, at::kLong), 256);
    return (block.index_select(0, t.sender) == block.index_select(0, t.receiver)).sum().item<double>() / t.edges;
  };
  const EdgeTopology input = EdgeTopology::build(g, N, o, z);
  o.spatial_bin = 2.5;
  const EdgeTopology spatial = EdgeTopology::build(g, N, o, z, x);
  ASSERT_FALSE(input.node_order.defined());
  ASSERT_TRUE(spatial.node_order.defined());
  EXPECT_TRUE(at::equal(std::get<0>(at::sort(spatial.node_order)), at::arange(N, at::kLong)));
  EXPECT_TRUE(at::equal(spatial.node_row.index_select(0, spatial.node_order), at::arange(N, at::kLong)));
  EXPECT_FALSE(at::equal(spatial.node_order, at::arange(N, at::kLong)));
  // The same edges between the same atoms (in the caller's names), sorted by receiver row.
  const at::Tensor caller_s = spatial.node_order.index_select(0, spatial.sender);
  const at::Tensor caller_r = spatial.node_order.index_select(0, spatial.receiver);
  EXPECT_TRUE(at::equal(caller_s, g.sender.index_select(0, spatial.order)));
  EXPECT_TRUE(at::equal(caller_r, g.receiver.index_select(0, spatial.order)));
  EXPECT_TRUE(at::equal(spatial.species_local, g.species.index_select(0, spatial.node_order)));
  EXPECT_TRUE(spatial.matches(g, N, o));
  const double strips = kept_inside(input), compact = kept_inside(spatial);
  EXPECT_GT(compact, 1.2 * strips) << "strips keep " << strips << " of the edges inside their block";
  // Ghosts keep their place: rows [nlocal, ntotal) are the same nodes.
  const at::Tensor with_ghosts = space_filling_order(x, N - 100, 2.5);
  EXPECT_TRUE(at::equal(with_ghosts.narrow(0, N - 100, 100), at::arange(N - 100, N, at::kLong)));
  EXPECT_TRUE(at::equal(std::get<0>(at::sort(with_ghosts.narrow(0, 0, N - 100))), at::arange(N - 100, at::kLong)));
}

}  // namespace
}  // namespace flashmace
