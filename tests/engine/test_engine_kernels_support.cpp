#include "engine/test_engine_kernels_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "engine/ops/graph_checks.h"
#include "engine/step/atom_sums.h"

namespace flashmace::testing {
namespace {

// A random graph of `atoms` atoms (the first `nlocal` owned, receivers among them) with edge
// gradients and vectors; padding edges and atoms as in a CUDA-graph step.
struct SumsCase {
  EdgeTopology topo;
  at::Tensor grad, v64;  // in topo's order
};

SumsCase sums_case(const at::Device& device, at::ScalarType dtype) {
  const int64_t atoms = 300, nlocal = 200, E = 5000;
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  GraphTensors g;
  g.species = at::zeros({atoms}, i64).to(device);
  g.sender = at::randint(0, atoms, {E}, i64).to(device);
  g.receiver = at::randint(0, nlocal, {E}, i64).to(device);
  TopologyOptions o;
  o.edge_chunk = 1 << 20;
  o.atom_chunk = 1 << 20;
  o.padded_edges = E + 300;
  o.padded_atoms = atoms + 20;
  o.atom_sums = true;
  SumsCase c{EdgeTopology::build(g, nlocal, o, at::tensor(std::vector<int64_t>{29}, i64).to(device)), {}, {}};
  const at::Tensor real = (c.topo.order < E).unsqueeze(1);  // padding edges have zero gradient
  c.grad = (at::randn({o.padded_edges, 3}, at::TensorOptions().dtype(at::kDouble)).to(device) * real).to(dtype);
  c.v64 = at::randn({o.padded_edges, 3}, at::TensorOptions().dtype(at::kDouble)).to(device);
  return c;
}

// Plain loops over the edges: F[s] += g, F[r] -= g; W -= (v g^T + g v^T) / 2.
std::pair<at::Tensor, at::Tensor> loops(const SumsCase& c) {
  const at::Tensor s = c.topo.sender.cpu(), r = c.topo.receiver.cpu();
  const at::Tensor g = c.grad.to(at::kCPU, at::kDouble).contiguous(), v = c.v64.cpu().contiguous();
  at::Tensor F = at::zeros({c.topo.padded_atoms, 3}, g.options()), W = at::zeros({3, 3}, g.options());
  const double* gp = g.data_ptr<double>();
  const double* vp = v.data_ptr<double>();
  double* f = F.data_ptr<double>();
  double* w = W.data_ptr<double>();
  for (int64_t e = 0; e < g.size(0); ++e) {
    const int64_t se = s[e].item<int64_t>(), re = r[e].item<int64_t>();
    for (int a = 0; a < 3; ++a) {
      f[3 * se + a] += gp[3 * e + a];
      f[3 * re + a] -= gp[3 * e + a];
      for (int b = 0; b < 3; ++b) w[3 * a + b] -= 0.5 * (vp[3 * e + a] * gp[3 * e + b] + gp[3 * e + a] * vp[3 * e + b]);
    }
  }
  return {F, W};
}

}  // namespace

double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kCPU, at::kDouble), y = b.to(at::kCPU, at::kDouble);
  if (!x.sizes().equals(y.sizes()) || !at::isfinite(x).all().item<bool>() || !at::isfinite(y).all().item<bool>())
    return INFINITY;
  const double scale = std::max(y.abs().max().item<double>(), 1e-300);
  return (x - y).abs().max().item<double>() / scale;
}

void check_equality(const at::Device& device) {
  const auto i64 = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor a = at::randint(0, 1000, {70000}, i64), b = at::randint(0, 10, {5}, i64);
  EXPECT_TRUE(all_equal({{a, a.clone()}, {b, b.clone()}}));
  at::Tensor c = a.clone();
  c[69999] = c[69999] + 1;  // the last element of the longest array
  EXPECT_FALSE(all_equal({{b, b.clone()}, {a, c}}));
  EXPECT_FALSE(all_equal({{a, a.narrow(0, 0, 69999).clone()}}));  // sizes differ
  at::Tensor d = b.clone();
  d[0] = d[0] - 1;
  EXPECT_FALSE(all_equal({{a, a.clone()}, {b, d}}));

  const at::Tensor v = at::randn({400, 3}, i64.dtype(at::kDouble));
  const at::Tensor pa = at::arange(0, 200, i64), pb = at::arange(200, 400, i64);
  at::Tensor w = v.clone();
  w.narrow(0, 200, 200).copy_(-w.narrow(0, 0, 200));
  w[0][2] = 0.0;
  w[200][2] = -0.0;  // -0.0 is the negation of 0.0
  EXPECT_TRUE(all_negated({{w, pa, pb}}));
  // b < 0: an edge without a partner, not compared; several sets, one answer
  const at::Tensor unpaired = at::full({1}, -1, i64);
  EXPECT_TRUE(all_negated({{w, pa, pb}, {w, at::tensor({5}, i64), unpaired}}));
  EXPECT_TRUE(all_negated({{w.narrow(0, 100, 300), pa.narrow(0, 100, 100) - 100, pb.narrow(0, 100, 100) - 100}}));
  at::Tensor u = w.clone();
  u[100][0] = u[100][0] + 1.0;
  EXPECT_FALSE(all_negated({{w, pa.narrow(0, 0, 50), pb.narrow(0, 0, 50)}, {u, pa, pb}}));  // the second set
  w[399][1] = std::nextafter(w[399][1].item<double>(), 1e300);  // one ulp off
  EXPECT_FALSE(all_negated({{w, pa, pb}}));
  const at::Tensor pb_off = pb.clone();
  pb_off[199] = -1;  // that pair no longer compared
  EXPECT_TRUE(all_negated({{w, pa, pb_off}}));
}

void check_atom_sums(const at::Device& device) {
  for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    const SumsCase c = sums_case(device, dtype);
    const auto [F, W] = loops(c);
    AtomSumsRequest want;
    want.forces = want.virial = true;
    const AtomSums got = atom_sums(c.topo, c.grad, c.v64, want);
    EXPECT_LT(relative_error(got.forces, F), 1e-13) << at::toString(dtype);
    EXPECT_LT(relative_error(got.virial, W), 1e-13) << at::toString(dtype);
    want.forces = false;  // the virial alone
    EXPECT_LT(relative_error(atom_sums(c.topo, c.grad, c.v64, want).virial, W), 1e-13);
    // Reproducible bit for bit.
    EXPECT_TRUE(at::equal(atom_sums(c.topo, c.grad, c.v64, {true, true, false}).forces, got.forces));
  }
}

}  // namespace flashmace::testing
