// The fast engine's small fused operations against independent truth:
// - graph checks (engine/graph_checks.h): equal / unequal int64 arrays (a difference in the last
//   element of the longest array, sizes that differ) and exact negation of paired vectors;
// - per-atom sums (engine/atom_sums_op.h): forces and virial from edge gradients against plain
//   loops over the edges, with padding edges and atoms;
// - the fused radial-MLP kernels (engine/radial_mlp_op.h, float32 on CUDA) against the GEMM-and-silu
//   code of edge_terms.h, forward and vjp, with row indices and pair sums.
// CPU cases run in CI (label engine); *Gpu* cases run under `ctest -L gpu`.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/atom_sums_op.h"
#include "engine/edge_terms.h"
#include "engine/graph_checks.h"
#include "engine/radial_mlp_op.h"
#include "model/device.h"

namespace flashmace {
namespace {

bool gpu_kernels_available() {
#if FLASHMACE_CUDA_KERNELS
  return cuda_available();
#else
  return false;
#endif
}

at::Device gpu() { return at::Device(at::kCUDA, 0); }

// max |a - b| / max(|b|, tiny) over all elements; fails (returns +inf) on a non-finite value.
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
  EXPECT_TRUE(all_negated(w, pa, pb));
  w[399][1] = std::nextafter(w[399][1].item<double>(), 1e300);  // one ulp off
  EXPECT_FALSE(all_negated(w, pa, pb));
}

TEST(GraphChecks, EqualityAndNegationOnCpu) { check_equality(at::kCPU); }

TEST(GraphChecksGpu, EqualityAndNegationOnCuda) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_equality(gpu());
}

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

TEST(AtomSums, ForcesAndVirialOnCpu) { check_atom_sums(at::kCPU); }

TEST(AtomSumsGpu, ForcesAndVirialOnCuda) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_atom_sums(gpu());
}

// Random folded MLP weights: widths = {n_basis, hidden..., output}.
std::vector<at::Tensor> random_mlp(const std::vector<int64_t>& widths, const at::TensorOptions& o) {
  std::vector<at::Tensor> w;
  for (std::size_t k = 0; k + 1 < widths.size(); ++k) w.push_back(at::randn({widths[k], widths[k + 1]}, o) * 0.3);
  return w;
}

// Pairs over E edges: rows (first, second) with some singles and padding rows (first 0, second -1).
RadialPairs random_pairs(int64_t E, const at::Device& device) {
  std::mt19937 rng(7);
  std::vector<int64_t> perm(E);
  for (int64_t e = 0; e < E; ++e) perm[e] = e;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> first, second;
  for (int64_t k = 0; k < E;) {
    const bool pair = k + 1 < E && rng() % 5 != 0;
    first.push_back(perm[k]);
    second.push_back(pair ? perm[k + 1] : -1);
    k += pair ? 2 : 1;
  }
  for (int k = 0; k < 3; ++k) {
    first.push_back(0);
    second.push_back(-1);
  }
  RadialPairs p;
  p.first = at::tensor(first).to(device);
  p.second = at::tensor(second).to(device);
  p.rows = p.first.size(0);
  return p;
}

void check_radial_mlp(const std::vector<int64_t>& widths, double tol) {
  const at::TensorOptions o = at::TensorOptions().dtype(at::kFloat).device(gpu());
  const std::vector<at::Tensor> w = random_mlp(widths, o);
  const RadialMlp mlp(w);
  ASSERT_TRUE(mlp.fused());
  const int64_t E = 1000;  // not a multiple of the kernels' blocks
  // ef as a column range of a wider tensor: rows with a stride of their own
  const at::Tensor ef = at::randn({E, widths[0] + 3}, o).narrow(1, 1, widths[0]);
  const RadialPairs pairs = random_pairs(E, gpu());
  for (bool indexed : {false, true}) {
    const at::Tensor index = indexed ? pairs.first : at::Tensor();
    std::vector<at::Tensor> pre, pre_ref;
    const at::Tensor h = mlp.hidden(ef, index, &pre);
    const at::Tensor h_ref = radial_mlp_hidden(w, indexed ? ef.index_select(0, index) : ef.contiguous(), &pre_ref);
    EXPECT_LT(relative_error(h, h_ref), tol) << "forward, indexed " << indexed;
    ASSERT_EQ(pre.size(), pre_ref.size());
    for (std::size_t k = 0; k < pre.size(); ++k) EXPECT_LT(relative_error(pre[k], pre_ref[k]), tol) << "pre " << k;

    // vjp from a per-row gradient, and (indexed) from a per-edge gradient summed over pairs
    const at::Tensor g_rows = at::randn({h.size(0), h.size(1)}, o);
    EXPECT_LT(relative_error(mlp.hidden_vjp(pre, g_rows, nullptr), radial_mlp_hidden_vjp(w, pre_ref, g_rows)), tol)
        << "vjp, indexed " << indexed;
    if (indexed) {
      const at::Tensor g_edges = at::randn({E, h.size(1)}, o);
      EXPECT_LT(relative_error(mlp.hidden_vjp(pre, g_edges, &pairs),
                               radial_mlp_hidden_vjp(w, pre_ref, sum_pair_rows(pairs, g_edges))),
                tol)
          << "vjp with pair sums";
    }
  }
}

TEST(RadialMlpGpu, FusedEqualsGemms) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_radial_mlp({10, 64, 64, 64, 1280}, 2e-5);  // MACE-MP-0's shape
  check_radial_mlp({6, 16, 16, 96}, 2e-5);         // the test models' shape
  check_radial_mlp({8, 33, 64, 7, 20}, 2e-5);      // odd widths
}

TEST(RadialMlp, OnlyFloat32CudaWithinTheWidthsIsFused) {
  EXPECT_FALSE(RadialMlp(random_mlp({10, 64, 64}, at::TensorOptions().dtype(at::kFloat))).fused());  // CPU
  if (!gpu_kernels_available()) return;
  const at::TensorOptions c = at::TensorOptions().device(gpu());
  EXPECT_FALSE(RadialMlp(random_mlp({10, 64, 64}, c.dtype(at::kDouble))).fused());
  EXPECT_FALSE(RadialMlp(random_mlp({10, 65, 64}, c.dtype(at::kFloat))).fused());
  EXPECT_TRUE(RadialMlp(random_mlp({10, 64, 64}, c.dtype(at::kFloat))).fused());
}

}  // namespace
}  // namespace flashmace
