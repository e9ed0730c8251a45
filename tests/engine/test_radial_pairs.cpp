// Reverse-edge pairs for the shared radial MLP (engine/ops/radial_pairs.h): in a periodic single
// domain every edge pairs with its reverse, also between an atom and its own images and between two
// atoms joined through several images; edges from ghost atoms stay single; a vector that is not the
// exact negation of its reverse's stays single; the pair sums are first + second, bit for bit. The
// CUDA kernel's pair sums: gpu/test_gpu_radial_pairs.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "core/lattice.h"
#include "core/local_graph.h"
#include "core/structure.h"
#include "engine/ops/radial_pairs.h"
#include "engine/test_radial_pairs_support.h"

namespace flashmace {
namespace {

using testing::domain_edges;
using testing::Edges;
using testing::ghost_domain;

// A small fcc box (7.2 A) with a 7.5 A cutoff: atoms see their own images and pairs meet
// through several images.
Edges periodic_edges() {
  const Structure s = make_cubic_lattice("fcc", 3.61, 2, {29}, 0.1, 3);
  const Graph g = build_neighbor_list(s, 7.5);
  const int64_t E = g.num_edges();
  std::vector<double> v(3 * E);
  for (int64_t e = 0; e < E; ++e)
    for (int d = 0; d < 3; ++d) {
      double shift = 0;
      for (int k = 0; k < 3; ++k) shift += g.unit_shifts[3 * e + k] * s.cell[3 * k + d];
      v[3 * e + d] = s.positions[3 * g.receiver[e] + d] - s.positions[3 * g.sender[e] + d] + shift;
    }
  return {at::tensor(g.sender), at::tensor(g.receiver), at::tensor(v).view({E, 3})};
}

std::vector<int64_t> longs(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// Every row's edges: first < second, they join the same atoms in opposite directions along
// exactly opposite vectors, and both map to that row.
void expect_consistent(const Edges& g, const RadialPairs& p) {
  const std::vector<int64_t> s = longs(g.sender), r = longs(g.receiver), index = longs(p.index), first = longs(p.first),
                             second = longs(p.second);
  const at::Tensor v = g.vectors.contiguous();
  const double* vp = v.data_ptr<double>();
  ASSERT_EQ(static_cast<int64_t>(first.size()), p.rows);
  for (int64_t u = 0; u < p.rows; ++u) {
    const int64_t a = first[u], b = second[u];
    EXPECT_EQ(index[a], u);
    if (b < 0) continue;
    EXPECT_LT(a, b);
    EXPECT_EQ(index[b], u);
    EXPECT_EQ(s[a], r[b]);
    EXPECT_EQ(r[a], s[b]);
    for (int d = 0; d < 3; ++d) EXPECT_EQ(vp[3 * a + d], -vp[3 * b + d]) << a << " " << b;
  }
}

TEST(RadialPairs, PeriodicDomainPairsEveryEdge) {
  const Edges g = periodic_edges();
  const int64_t E = g.sender.size(0);
  const at::Tensor self = (g.sender == g.receiver);
  ASSERT_GT(self.sum().item<int64_t>(), 0) << "the box should hold edges to an atom's own images";
  const RadialPairs p = pair_reverse_edges(g.sender, g.receiver, g.vectors, at::kDouble);
  EXPECT_EQ(p.rows * 2, E);
  EXPECT_TRUE((p.second >= 0).all().item<bool>());
  EXPECT_TRUE((p.share == 0.5).all().item<bool>());
  expect_consistent(g, p);
}

TEST(RadialPairs, GhostEdgesStaySingle) {
  const LocalGraph lg = ghost_domain(4);
  const Edges g = domain_edges(lg);
  const int64_t E = lg.num_edges();
  const RadialPairs p = pair_reverse_edges(g.sender, g.receiver, g.vectors, at::kDouble);
  expect_consistent(g, p);
  const at::Tensor from_ghost = g.sender >= lg.nlocal;
  const int64_t ghost_edges = from_ghost.sum().item<int64_t>(), local_edges = E - ghost_edges;
  ASSERT_GT(ghost_edges, 0);
  ASSERT_GT(local_edges, 0);
  // Local-local edges pair up; ghost edges have no reverse here.
  EXPECT_EQ(p.rows, local_edges / 2 + ghost_edges);
  EXPECT_TRUE((p.share.squeeze(1) == at::where(from_ghost, 1.0, 0.5)).all().item<bool>());
}

TEST(RadialPairs, InexactReverseStaysSingle) {
  Edges g = periodic_edges();
  const RadialPairs all = pair_reverse_edges(g.sender, g.receiver, g.vectors, at::kDouble);
  const int64_t a = all.first[3].item<int64_t>(), b = all.second[3].item<int64_t>();
  g.vectors = g.vectors.clone();
  double* x = g.vectors.data_ptr<double>() + 3 * b;
  *x = std::nextafter(*x, 1e9);  // one ulp off the exact negation
  const RadialPairs p = pair_reverse_edges(g.sender, g.receiver, g.vectors, at::kDouble);
  EXPECT_EQ(p.rows, all.rows + 1);
  EXPECT_EQ(p.share[a].item<double>(), 1.0);
  EXPECT_EQ(p.share[b].item<double>(), 1.0);
  expect_consistent(g, p);
}

// The cache hands back the pairs of the last call while edges and vectors allow, and pairs anew
// when a pair's vectors stop being exact negations or the edges change.
TEST(RadialPairs, CacheReusesOnlyWhileThePairsHold) {
  Edges g = periodic_edges();
  const int64_t E = g.sender.size(0);
  const std::vector<RadialPairCache::Chunk> chunks = {{0, E / 2, true}, {E / 2, E - E / 2, true}};
  RadialPairCache cache;
  const std::vector<RadialPairs> a = cache.pairs(g.sender, g.receiver, g.vectors, chunks, at::kDouble);
  ASSERT_EQ(a.size(), 2u);
  // Same edges, vectors moved together (as in an MD step): the same pairs, not recomputed.
  const at::Tensor moved = g.vectors * 1.01;
  const std::vector<RadialPairs>& b = cache.pairs(g.sender, g.receiver, moved, chunks, at::kDouble);
  EXPECT_TRUE(b[0].index.is_same(a[0].index));
  // One vector off its partner's negation by an ulp: paired anew, that edge now single.
  at::Tensor off = moved.clone();
  const int64_t e = a[0].second[0].item<int64_t>();
  ASSERT_GE(e, 0);
  double* x = off.data_ptr<double>() + 3 * e;
  *x = std::nextafter(*x, 1e9);
  const std::vector<RadialPairs>& c = cache.pairs(g.sender, g.receiver, off, chunks, at::kDouble);
  EXPECT_FALSE(c[0].index.is_same(a[0].index));
  EXPECT_EQ(c[0].rows, a[0].rows + 1);
  EXPECT_EQ(c[0].share[e].item<double>(), 1.0);
  // The same in the second chunk (its pairs index edges within it), with the edges named by an id
  // (not compared again, not kept by the cache).
  const std::vector<RadialPairs> named = cache.pairs(g.sender, g.receiver, moved, chunks, at::kDouble, 7);
  EXPECT_TRUE(cache.pairs(g.sender, g.receiver, moved, chunks, at::kDouble, 7)[1].index.is_same(named[1].index));
  int64_t k = 0;
  while (named[1].second[k].item<int64_t>() < 0) ++k;
  const int64_t e1 = E / 2 + named[1].second[k].item<int64_t>();
  at::Tensor off1 = moved.clone();
  double* x1 = off1.data_ptr<double>() + 3 * e1;
  *x1 = std::nextafter(*x1, 1e9);
  const std::vector<RadialPairs>& c1 = cache.pairs(g.sender, g.receiver, off1, chunks, at::kDouble, 7);
  EXPECT_FALSE(c1[1].index.is_same(named[1].index));
  EXPECT_EQ(c1[1].rows, named[1].rows + 1);
  EXPECT_EQ(c1[1].share[e1 - E / 2].item<double>(), 1.0);
  // Other edges: paired anew too.
  const at::Tensor swapped = g.sender.flip(0), swapped_r = g.receiver.flip(0), swapped_v = g.vectors.flip(0);
  const std::vector<RadialPairs>& d = cache.pairs(swapped, swapped_r, swapped_v, chunks, at::kDouble);
  expect_consistent({swapped.narrow(0, 0, E / 2), swapped_r.narrow(0, 0, E / 2), swapped_v.narrow(0, 0, E / 2)}, d[0]);
  // Nothing to pair: empty pairs.
  const std::vector<RadialPairs>& none = cache.pairs(g.sender, g.receiver, g.vectors, {{0, E, false}}, at::kDouble);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_FALSE(none[0].index.defined());
}

TEST(RadialPairs, PairRowsSumFirstThenSecond) {
  const LocalGraph lg = ghost_domain(5);
  const Edges g = domain_edges(lg);
  const int64_t E = lg.num_edges();
  const RadialPairs p = pair_reverse_edges(g.sender, g.receiver, g.vectors, at::kFloat);
  EXPECT_EQ(p.share.scalar_type(), at::kFloat);
  const at::Tensor values = at::randn({E, 4}, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor sums = sum_pair_rows(p, values);
  ASSERT_EQ(sums.size(0), p.rows);
  const std::vector<int64_t> first = longs(p.first), second = longs(p.second);
  for (int64_t u = 0; u < p.rows; ++u) {
    const at::Tensor want = second[u] < 0 ? values[first[u]] : values[first[u]] + values[second[u]];
    EXPECT_TRUE(at::equal(sums[u], want)) << u;
  }
}

}  // namespace
}  // namespace flashmace
