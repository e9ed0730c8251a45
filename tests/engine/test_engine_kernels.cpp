// The fast engine's small fused operations against independent truth:
// - graph checks (engine/graph_checks.h): equal / unequal int64 arrays (a difference in the last
//   element of the longest array, sizes that differ) and exact negation of paired vectors;
// - per-atom sums (engine/atom_sums_op.h): forces and virial from edge gradients against plain
//   loops over the edges, with padding edges and atoms;
// - the reassociated first layer's CUDA kernels (engine/first_layer.h) against its CPU
//   formulation (ATen GEMMs per path, and the CPU loops of the per-edge sums);
// CPU cases run in CI (label engine); *Gpu* cases run under `ctest -L gpu`.
#include <gtest/gtest.h>

#include <cmath>

#include "core/irreps.h"
#include "engine/atom_sums_op.h"
#include "engine/conv_tp_descriptor.h"
#include "engine/first_layer.h"
#include "engine/graph_checks.h"
#include "test_support.h"

namespace flashmace {
namespace {

using testing::gpu_kernels_available;

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


// A first layer of MACE's shape, small: scalar inputs for Z species slots, harmonics up to l = 3,
// outputs 0e + 1o + 2e + 3o; rows with and without edges, slots in runs and interleaved, rows of
// h shared by edge pairs through h_index.
struct FirstLayerCase {
  ConvTPDescriptor d;
  at::Tensor w_out, x, h, h_index, Y, slot, row_ptr, dagg;
  int64_t nrows = 0;
};

FirstLayerCase first_layer_case(at::ScalarType dtype) {
  const Irreps in1 = Irreps::parse("24x0e"), sh = Irreps::spherical_harmonics(3);
  FirstLayerCase c;
  c.d = ConvTPDescriptor::build(in1, sh, conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e+3o")));
  const int64_t Z = 3, H = 8;
  const std::vector<int64_t> counts = {5, 0, 9, 1, 0, 14, 3, 7};
  c.nrows = static_cast<int64_t>(counts.size());
  const auto f = at::TensorOptions().dtype(dtype);
  const auto i64 = at::TensorOptions().dtype(at::kLong);
  const at::Tensor count = at::tensor(counts, i64);
  c.row_ptr = at::cat({at::zeros({1}, i64), at::cumsum(count, 0)});
  const int64_t E = count.sum().item<int64_t>();
  c.w_out = at::randn({H, c.d.weight_numel}, f);
  c.x = at::randn({Z, c.d.dim_in1}, f);
  c.h = at::randn({E, H}, f);
  c.h_index = at::randperm(E, i64);
  c.Y = at::randn({E, c.d.dim_sh}, f);
  c.slot = at::randint(0, Z, {E}, i64);
  c.slot.narrow(0, 5, 9).fill_(1);  // a run of one slot: row 2
  c.dagg = at::randn({c.nrows, c.d.dim_mid}, f);
  return c;
}

void check_first_layer_on_cuda(at::ScalarType dtype, double tolerance) {
  const FirstLayerCase c = first_layer_case(dtype);
  const auto cuda = [](const at::Tensor& t) { return t.to(gpu()); };
  const FirstLayerOp cpu_op(c.d, c.w_out), gpu_op(c.d, cuda(c.w_out));
  const int64_t Z = c.x.size(0);
  for (const at::Tensor& h_index : {at::Tensor(), c.h_index}) {
    const at::Tensor S = cpu_op.sums(c.h, c.Y, c.slot, c.row_ptr, c.nrows, Z, h_index);
    const at::Tensor S_gpu = gpu_op.sums(cuda(c.h), cuda(c.Y), cuda(c.slot), cuda(c.row_ptr), c.nrows, Z,
                                         h_index.defined() ? cuda(h_index) : at::Tensor());
    // The GPU sums in double (Y staged as double) and rounds once: against the same sums in double
    // on the CPU (from the same inputs) it is within half a float32 ulp per element in float32, and
    // equal to round-off in float64. (Against the CPU's float32 sums it is not: they round at every
    // step, and once came out 1.006e-7 apart.)
    const FirstLayerOp cpu64_op(c.d, c.w_out.to(at::kDouble));
    const auto f64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
    const at::Tensor S64 = cpu64_op.sums(f64(c.h), f64(c.Y), c.slot, c.row_ptr, c.nrows, Z, h_index);
    EXPECT_LT(relative_error(S_gpu.to(at::kDouble), S64), dtype == at::kDouble ? 1e-15 : 1e-7) << at::toString(dtype);
    const auto [dh, dY] = cpu_op.sums_backward(S, c.h, c.Y, c.slot, c.row_ptr, h_index);
    const auto [dh_gpu, dY_gpu] = gpu_op.sums_backward(cuda(S), cuda(c.h), cuda(c.Y), cuda(c.slot), cuda(c.row_ptr),
                                                       h_index.defined() ? cuda(h_index) : at::Tensor());
    EXPECT_LT(relative_error(dh_gpu, dh), tolerance) << at::toString(dtype);
    EXPECT_LT(relative_error(dY_gpu, dY), tolerance) << at::toString(dtype);
  }
  const at::Tensor S = at::randn({c.nrows, Z, c.h.size(1), c.d.dim_sh}, c.h.options());
  EXPECT_LT(relative_error(gpu_op.aggregate(cuda(S), cuda(c.x)), cpu_op.aggregate(S, c.x)), tolerance);
  EXPECT_LT(relative_error(gpu_op.aggregate_backward(cuda(c.dagg), cuda(c.x), c.h.size(1)),
                           cpu_op.aggregate_backward(c.dagg, c.x, c.h.size(1))),
            tolerance);
  // Deterministic: bit for bit on a repeat.
  EXPECT_TRUE(at::equal(gpu_op.aggregate_backward(cuda(c.dagg), cuda(c.x), c.h.size(1)),
                        gpu_op.aggregate_backward(cuda(c.dagg), cuda(c.x), c.h.size(1))));
}

TEST(FirstLayerGpu, KernelsMatchTheCpuFormulation) {
  if (!gpu_kernels_available()) GTEST_SKIP() << "no CUDA GPU or no CUDA kernels built";
  check_first_layer_on_cuda(at::kDouble, 1e-13);
  check_first_layer_on_cuda(at::kFloat, 1e-5);
}

}  // namespace
}  // namespace flashmace
