// The fused CUDA compaction of a skin list (engine/kernels/skin_compaction_kernels.h) against its
// ATen formulation (SkinList::compact_reference, the CPU's path) on the same list and positions:
// every output integer for integer and bit for bit, with and without radial pairs, folded images
// and ghost rows, both pair-share dtypes, one block and receiver rows in three blocks (an edge chunk
// each); and on outgrown buckets the same status with every index still inside its array.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/lattice.h"
#include "core/local_graph.h"
#include "core/structure.h"
#include "engine/step/skin_list.h"
#include "test_support.h"

namespace flashmace {
namespace {

constexpr double kCutoff = 5.0, kSkin = 1.0;

struct Domain {
  ListTensors list;
  at::Tensor positions, cell;  // float64 on the device
};

at::Tensor longs(const std::vector<int64_t>& v, const at::Device& d) { return at::tensor(v).to(d); }

// A random Ni-Cu alloy (108 atoms), its list within the cutoff plus the skin: every sender folded
// into its atom with an image offset, or (ghosts) explicit ghost rows.
Domain make_domain(bool ghosts, const at::Device& d) {
  const Structure s = make_cubic_lattice("fcc", 3.61, 3, {28, 29}, 0.1, 5);
  Domain out;
  std::vector<int64_t> species;
  std::vector<double> x;
  if (!ghosts) {
    const Graph g = build_neighbor_list(s, kCutoff + kSkin);
    for (int z : s.atomic_numbers) species.push_back(z == 28 ? 0 : 1);
    std::vector<int32_t> image;
    for (int k : g.unit_shifts) image.push_back(-k);  // (Graph adds the shift, the list subtracts)
    out.list.graph = GraphTensors{longs(species, d), longs(g.sender, d), longs(g.receiver, d)};
    out.list.image = at::tensor(image).view({-1, 3}).to(d);
    out.list.nlocal = s.size();
    x = s.positions;
  } else {
    std::vector<int> owner;
    const LocalGraph g = periodic_local_graph(s, kCutoff + kSkin, &owner);
    for (int z : g.atomic_numbers) species.push_back(z == 28 ? 0 : 1);
    out.list.graph = GraphTensors{longs(species, d), longs(g.sender, d), longs(g.receiver, d)};
    out.list.image = at::zeros({g.num_edges(), 3}, at::TensorOptions().dtype(at::kInt).device(d));
    out.list.nlocal = g.nlocal;
    x = g.positions;
  }
  out.positions = at::tensor(x).view({-1, 3}).to(d);
  out.cell = at::tensor(std::vector<double>(s.cell.begin(), s.cell.end())).view({3, 3}).to(d);
  return out;
}

// blocks: receiver rows in blocks of 40 (3 blocks; one edge chunk each), else one block.
SkinList make_skin(const Domain& dom, bool pairs, at::ScalarType dtype, bool blocks) {
  TopologyOptions o;
  o.edge_chunk = dom.list.graph.sender.size(0) + 4096;
  o.atom_chunk = blocks ? 40 : dom.list.nlocal;
  o.padded_atoms = dom.list.graph.species.size(0) + 37;  // padding atoms past the last node
  o.sender_csr = true;
  o.atom_sums = true;
  const at::Tensor z = at::tensor(std::vector<int64_t>{28, 29}).to(dom.positions.device());
  return SkinList::build(dom.list, dom.positions, dom.cell, kCutoff, o, pairs, dtype, z);
}

// Copies of everything compact() writes, so that both formulations fill their own.
struct Outputs {
  EdgeTopology topo;
  std::vector<RadialPairs> pairs;  // one per chunk, or none
  at::Tensor v64;
};

Outputs fresh_outputs(const SkinList& skin) {
  Outputs o{skin.topology, skin.pairs, {}};
  EdgeTopology& t = o.topo;
  for (at::Tensor* x : {&t.sender, &t.receiver, &t.z_sender, &t.z_receiver, &t.sender_slot, &t.sender_order,
                        &t.sender_ptr, &t.sender_counts, &t.receiver_ptr, &t.receiver_counts})
    *x = x->clone();
  for (auto& r : t.chunk_rows) r = r.clone();
  for (auto& r : t.chunk_row_ptr) r = r.clone();
  for (auto& c : t.chunk_senders) c = XIndexCsr{c.perm.clone(), c.ptr.clone(), {}};
  for (RadialPairs& p : o.pairs) p = RadialPairs{p.index.clone(), p.first.clone(), p.second.clone(), p.share.clone(), p.rows};
  o.v64 = at::full({t.padded_edges, 3}, -7.0, skin.status().options());
  return o;
}

std::vector<std::pair<std::string, at::Tensor>> named(const Outputs& o) {
  const EdgeTopology& t = o.topo;
  std::vector<std::pair<std::string, at::Tensor>> out = {
      {"sender", t.sender},         {"receiver", t.receiver},         {"z_sender", t.z_sender},
      {"z_receiver", t.z_receiver}, {"sender_slot", t.sender_slot},   {"sender_order", t.sender_order},
      {"sender_ptr", t.sender_ptr}, {"sender_counts", t.sender_counts}, {"receiver_ptr", t.receiver_ptr},
      {"receiver_counts", t.receiver_counts},   {"vectors", o.v64}};
  for (std::size_t k = 0; k < t.chunk_rows.size(); ++k) {
    const std::string c = " of chunk " + std::to_string(k);
    out.push_back({"chunk_rows" + c, t.chunk_rows[k]});
    out.push_back({"chunk_row_ptr" + c, t.chunk_row_ptr[k]});
    out.push_back({"csr perm" + c, t.chunk_senders[k].perm});
    out.push_back({"csr ptr" + c, t.chunk_senders[k].ptr});
  }
  for (std::size_t k = 0; k < o.pairs.size(); ++k) {
    const std::string c = " of chunk " + std::to_string(k);
    out.push_back({"pair index" + c, o.pairs[k].index});
    out.push_back({"pair first" + c, o.pairs[k].first});
    out.push_back({"pair second" + c, o.pairs[k].second});
    out.push_back({"pair share" + c, o.pairs[k].share});
  }
  return out;
}

// Both formulations at `positions`; returns their statuses (fused, reference).
std::pair<at::Tensor, at::Tensor> compact_both(SkinList& skin, const at::Tensor& positions, Outputs* fused,
                                               Outputs* reference) {
  skin.compact(positions, &fused->topo, &fused->pairs, &fused->v64);
  const at::Tensor fused_status = skin.status().cpu().clone();
  skin.compact_reference(positions, &reference->topo, &reference->pairs, &reference->v64);
  return {fused_status, skin.status().cpu().clone()};
}

class GpuSkinCompaction : public ::testing::TestWithParam<std::tuple<bool, bool, at::ScalarType, bool>> {
 protected:
  void SetUp() override {
    if (!testing::gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  }
};

TEST_P(GpuSkinCompaction, EqualsTheAtenFormulationBitForBit) {
  const auto [ghosts, pairs, dtype, blocks] = GetParam();
  const at::Device d(at::kCUDA, 0);
  const Domain dom = make_domain(ghosts, d);
  SkinList skin = make_skin(dom, pairs, dtype, blocks);
  ASSERT_EQ(skin.pairs.empty(), !pairs);
  ASSERT_EQ(skin.blocks(), blocks ? 3 : 1);
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-0.04, 0.04);
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    // Moves of up to 0.12 A per component (ghost rows move with their own random offsets: the
    // list's connectivity is all the compaction reads).
    std::vector<double> jitter(dom.positions.numel());
    for (double& j : jitter) j = step * u(rng);
    const at::Tensor x = dom.positions + at::tensor(jitter).view({-1, 3}).to(d);
    Outputs fused = fresh_outputs(skin), reference = fresh_outputs(skin);
    const auto [sf, sr] = compact_both(skin, x, &fused, &reference);
    ASSERT_EQ(sf[0].item<double>(), 0) << "the bucket holds these moves";
    EXPECT_EQ(sf[0].item<double>(), sr[0].item<double>());
    EXPECT_EQ(sf[2].item<double>(), 0);
    EXPECT_NEAR(sf[1].item<double>(), sr[1].item<double>(), 1e-15 * sr[1].item<double>());
    const auto a = named(fused), b = named(reference);
    for (std::size_t k = 0; k < a.size(); ++k)
      EXPECT_TRUE(at::equal(a[k].second.cpu(), b[k].second.cpu())) << a[k].first;
  }
}

TEST_P(GpuSkinCompaction, OutgrownBucketsKeepEveryIndexInBounds) {
  const auto [ghosts, pairs, dtype, blocks] = GetParam();
  const at::Device d(at::kCUDA, 0);
  const Domain dom = make_domain(ghosts, d);
  SkinList skin = make_skin(dom, pairs, dtype, blocks);
  // Compressed by 6 %: ~20 % more pairs within the cutoff than the bucket's few percent headroom.
  skin.set_cell(dom.cell * 0.94);
  at::Tensor x = dom.positions * 0.94;
  x[3][1] = std::nan("");
  Outputs fused = fresh_outputs(skin), reference = fresh_outputs(skin);
  const auto [sf, sr] = compact_both(skin, x, &fused, &reference);
  EXPECT_GE(sf[0].item<double>(), 1);
  EXPECT_EQ(sf[0].item<double>(), sr[0].item<double>());
  EXPECT_EQ(sf[2].item<double>(), 1);
  EXPECT_EQ(sr[2].item<double>(), 1);
  const int64_t B = fused.topo.padded_edges, ntotal = dom.positions.size(0), A = fused.topo.padded_atoms;
  auto within = [](const at::Tensor& t, int64_t lo, int64_t hi, const std::string& what) {
    EXPECT_GE(t.min().item<int64_t>(), lo) << what;
    EXPECT_LE(t.max().item<int64_t>(), hi) << what;
  };
  const EdgeTopology& t = fused.topo;
  within(t.sender, 0, ntotal - 1, "sender");
  within(t.receiver, 0, dom.list.nlocal - 1, "receiver");
  within(t.sender_ptr.diff(), 0, B, "sender rows");
  within(t.receiver_ptr, 0, B, "receiver_ptr");
  EXPECT_EQ(t.receiver_ptr.size(0), A + 1);
  for (std::size_t k = 0; k < t.chunk_rows.size(); ++k) {
    const int64_t Bk = t.chunk_rows[k].size(0);  // (the chunk's bucket)
    within(t.chunk_row_ptr[k], 0, Bk, "chunk_row_ptr");
    within(t.chunk_row_ptr[k].diff(), 0, Bk, "row sizes");
    within(t.chunk_senders[k].perm, 0, Bk - 1, "csr perm");
    if (pairs) {
      within(fused.pairs[k].index, 0, fused.pairs[k].rows - 1, "pair index");
      within(fused.pairs[k].first, 0, Bk - 1, "pair first");
      within(fused.pairs[k].second, -1, Bk - 1, "pair second");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Domains, GpuSkinCompaction,
                         ::testing::Values(std::make_tuple(false, true, at::kDouble, false),
                                           std::make_tuple(false, true, at::kFloat, false),
                                           std::make_tuple(false, false, at::kDouble, false),
                                           std::make_tuple(true, true, at::kFloat, false),
                                           std::make_tuple(true, false, at::kDouble, false),
                                           std::make_tuple(false, true, at::kDouble, true),
                                           std::make_tuple(false, false, at::kFloat, true),
                                           std::make_tuple(true, true, at::kDouble, true)));

}  // namespace
}  // namespace flashmace
