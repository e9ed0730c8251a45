#include "engine/test_conv_tp_support.h"

#include <gtest/gtest.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <utility>

#include "core/model_file.h"
#include "core/wigner3j.h"
#include "engine/kernels/conv_tp_specialized.h"
#include "engine/ops/conv_tp_op.h"
#include "model/e3nn_ops.h"
#include "model/mace_params.h"
#include "test_support.h"

namespace flashmace::testing {

ConvTPProblem make_conv_tp_problem(const Irreps& in1, const Irreps& sh, const ConvTPLayout& layout,
                                   const std::vector<int64_t>& counts, int64_t num_x, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const at::TensorOptions f64 = at::TensorOptions().dtype(at::kDouble);
  const at::TensorOptions i64 = at::TensorOptions().dtype(at::kLong);
  ConvTPProblem p;
  p.in1 = in1;
  p.sh = sh;
  p.layout = layout;
  p.nrows = static_cast<int64_t>(counts.size());
  p.num_x = num_x;
  const at::Tensor c = at::tensor(counts, i64);
  p.receiver = at::repeat_interleave(at::arange(p.nrows, i64), c);
  p.row_ptr = at::cat({at::zeros({1}, i64), at::cumsum(c, 0)});
  const int64_t E = p.receiver.size(0);
  p.x = at::randn({num_x, in1.dim()}, gen, f64);
  p.xindex = at::randint(num_x, {E}, gen, i64);
  p.Y = at::randn({E, sh.dim()}, gen, f64);
  p.R = at::randn({E, layout.weight_numel}, gen, f64);
  p.dagg = at::randn({p.nrows, layout.mid.dim()}, gen, f64);
  return p;
}

ConvTPProblem convert(const ConvTPProblem& p, const at::TensorOptions& options) {
  ConvTPProblem q = p;
  const at::Device dev = options.device();
  for (at::Tensor* t : {&q.x, &q.Y, &q.R, &q.dagg}) *t = t->to(options);
  for (at::Tensor* t : {&q.xindex, &q.receiver, &q.row_ptr}) *t = t->to(dev);
  return q;
}

ConvTPReference conv_tp_reference(const ConvTPProblem& p) {
  std::vector<at::Tensor> w3j;
  for (const ConvTPPath& path : p.layout.paths) {
    const int l1 = p.in1[path.i1].ir.l, l2 = p.sh[path.i2].ir.l, l3 = p.layout.mid[path.k].ir.l;
    w3j.push_back(at::tensor(wigner_3j(l1, l2, l3), at::TensorOptions().dtype(at::kDouble))
                      .reshape({2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1})
                      .to(p.x.options()));
  }
  const at::Tensor x = p.x.detach().requires_grad_(true);
  const at::Tensor Y = p.Y.detach().requires_grad_(true);
  const at::Tensor R = p.R.detach().requires_grad_(true);
  const at::Tensor msg = conv_tensor_product(x.index_select(0, p.xindex), Y, R, p.in1, p.sh, p.layout, w3j);
  const at::Tensor agg = at::zeros({p.nrows, p.layout.mid.dim()}, p.x.options()).index_add(0, p.receiver, msg);
  ConvTPReference ref;
  ref.agg = agg.detach();
  if (msg.size(0) == 0) {
    ref.dR = at::zeros_like(p.R);
    ref.dY = at::zeros_like(p.Y);
    ref.dx = at::zeros_like(p.x);
    return ref;
  }
  const std::vector<at::Tensor> g = torch::autograd::grad({agg}, {R, Y, x}, {p.dagg});
  ref.dR = g[0];
  ref.dY = g[1];
  ref.dx = g[2];
  return ref;
}

namespace {

// float64: the kernels and the reference differ only in summation order (a few ulps per element,
// relative to the largest element).
constexpr double kRelTolF64 = 1e-12;
// float32 against float64: float32 round-off (6e-8) times the depth of the sums (<= a few hundred terms).
constexpr double kRelTolF32 = 1e-5;

// max |got - want| / max |want|; a failure (and infinity) if either holds a NaN or Inf, or the shapes differ.
double relative_error(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  const at::Tensor g = got.to(at::kCPU, at::kDouble), w = want.to(at::kCPU, at::kDouble);
  if (g.sizes() != w.sizes()) {
    ADD_FAILURE() << what << ": shape " << g.sizes() << " vs " << w.sizes();
    return INFINITY;
  }
  if (!at::isfinite(g).all().item<bool>() || !at::isfinite(w).all().item<bool>()) {
    ADD_FAILURE() << what << ": NaN or Inf";
    return INFINITY;
  }
  if (w.numel() == 0) return 0;
  const double scale = w.abs().max().item<double>();
  const double diff = (g - w).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

// The worst relative error seen per tolerance, printed by each check_layout (the margin under the tolerance).
std::map<double, double> worst;

void expect_matches(const Results& got, const ConvTPReference& want, double tol, const std::string& what) {
  const std::pair<const char*, std::pair<at::Tensor, at::Tensor>> outputs[] = {
      {"agg", {got.agg, want.agg}}, {"dR", {got.dR, want.dR}}, {"dY", {got.dY, want.dY}}, {"dx", {got.dx, want.dx}}};
  for (const auto& [name, gw] : outputs) {
    const double err = relative_error(gw.first, gw.second, what + " " + name);
    EXPECT_LE(err, tol) << what << " " << name;
    worst[tol] = std::max(worst[tol], err);
  }
}

void print_worst() {
  for (const auto& [tol, err] : worst) std::printf("worst relative error %.3g (tolerance %.0e)\n", err, tol);
  worst.clear();
}

// Receiver-segment patterns (edges per row).
std::vector<std::pair<std::string, std::vector<int64_t>>> segment_patterns(std::mt19937& rng) {
  std::vector<int64_t> mixed(23);
  std::uniform_int_distribution<int64_t> count(0, 6);
  for (auto& c : mixed) c = count(rng);
  mixed.front() = 0;
  mixed.back() = 0;
  mixed[5] = 1;
  return {{"mixed", mixed},
          {"one_edge_per_row", std::vector<int64_t>(9, 1)},
          {"many_in_one_row", {0, 0, 157, 0, 3}},
          {"no_edges", {0, 0, 0}}};
}

// Random irreps with l <= 3, random multiplicities (so paths differ in mul) and parities.
struct RandomLayout {
  Irreps in1, sh;
  ConvTPLayout layout;
};
RandomLayout random_layout(std::mt19937& rng) {
  std::uniform_int_distribution<int> mul(1, 6), coin(0, 1), lmax(1, 3);
  for (;;) {
    std::vector<MulIr> in, target;
    for (int l = 0; l <= 3; ++l)
      for (int p : {1, -1}) {
        if (coin(rng)) in.push_back({mul(rng), {l, p}});
        if (coin(rng)) target.push_back({1, {l, p}});
      }
    RandomLayout r{Irreps(in), Irreps::spherical_harmonics(lmax(rng)), {}};
    if (in.empty() || target.empty()) continue;
    r.layout = conv_tp_layout(r.in1, r.sh, Irreps(target));
    if (!r.layout.paths.empty()) return r;
  }
}

// p with the radial rows `rows` copied to every edge (first) and shared through `index` (second).
std::pair<ConvTPProblem, ConvTPProblem> share_radial_rows(ConvTPProblem p, const at::Tensor& rows,
                                                          const at::Tensor& index, const at::TensorOptions& options) {
  p.R = rows.index_select(0, index);
  ConvTPProblem expanded = convert(p, options);
  ConvTPProblem indexed = expanded;
  indexed.R = rows.to(options);
  return {expanded, indexed};
}

}  // namespace

namespace {

// ir_mul_columns(irreps) as an index: t.index_select(1, it) takes mul_ir columns from ir_mul ones;
// its inverse (inverse = true) the other way.
at::Tensor ir_mul_index(const Irreps& irreps, bool inverse, const at::Device& device) {
  const std::vector<int> columns = ir_mul_columns(irreps);
  std::vector<int64_t> index(columns.size());
  for (std::size_t j = 0; j < columns.size(); ++j) {
    if (inverse)
      index[static_cast<std::size_t>(columns[j])] = static_cast<int64_t>(j);
    else
      index[j] = columns[j];
  }
  return at::tensor(index, at::TensorOptions().dtype(at::kLong)).to(device);
}

}  // namespace

Results run_kernels(const ConvTPProblem& p, bool specialize, const at::Tensor& radial_index, bool dR_by_row,
                    bool ir_mul) {
  const ConvTPOp op(ConvTPDescriptor::build(p.in1, p.sh, p.layout, ir_mul), p.x.options(), specialize || ir_mul);
  if ((specialize || ir_mul) && p.x.is_cuda()) {
    EXPECT_NE(op.specialized(), nullptr) << "specialised kernels not built";
  }
  const at::Device dev = p.x.device();
  const at::Tensor x = ir_mul ? p.x.index_select(1, ir_mul_index(p.in1, true, dev)) : p.x;
  const at::Tensor dagg = ir_mul ? p.dagg.index_select(1, ir_mul_index(p.layout.mid, true, dev)) : p.dagg;
  Results r;
  r.agg = conv_tp_aggregate(op, x, p.xindex, p.Y, p.R, p.row_ptr, p.nrows, radial_index);
  const at::Tensor dx0 = at::full_like(p.x, 0.25);
  at::Tensor dx = dx0.clone();
  const ConvTPEdgeGrads g = conv_tp_aggregate_backward(op, dagg, x, p.xindex, p.Y, p.R, p.row_ptr, dx,
                                                       xindex_csr(p.xindex, p.num_x), radial_index, dR_by_row);
  r.dR = g.dR;
  r.dY = g.dY;
  r.dx = dx - dx0;
  if (ir_mul) {
    r.agg = r.agg.index_select(1, ir_mul_index(p.layout.mid, false, dev));
    r.dx = r.dx.index_select(1, ir_mul_index(p.in1, false, dev));
    return r;
  }
  // Over only the x rows the edges use (an edge chunk's senders), dx is the same bit for bit: each
  // row sums the same edges in the same order, and the rows no edge uses keep their values.
  at::Tensor dx_compact = dx0.clone();
  conv_tp_aggregate_backward(op, p.dagg, p.x, p.xindex, p.Y, p.R, p.row_ptr, dx_compact, xindex_csr_compact(p.xindex),
                             radial_index, dR_by_row);
  EXPECT_TRUE(at::equal(dx_compact, dx)) << "dx with the compact x-index CSR";
  return r;
}

void check_layout(const Irreps& in1, const Irreps& sh, const ConvTPLayout& layout, const at::Device& device,
                  uint64_t seed, const std::string& name, bool specialize, bool ir_mul) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  for (const auto& [pattern, counts] : segment_patterns(rng))
    for (const auto& [xname, num_x] : {std::pair<std::string, int64_t>{"sender", 17}, {"species", 3}}) {
      const std::string what = name + "/" + pattern + "/" + xname;
      const ConvTPProblem p64 = make_conv_tp_problem(in1, sh, layout, counts, num_x, seed++);
      const ConvTPReference ref = conv_tp_reference(p64);
      const Results got64 =
          run_kernels(convert(p64, at::TensorOptions().dtype(at::kDouble).device(device)), specialize, {}, false, ir_mul);
      expect_matches(got64, ref, kRelTolF64, what + " float64");
      const Results got32 =
          run_kernels(convert(p64, at::TensorOptions().dtype(at::kFloat).device(device)), specialize, {}, false, ir_mul);
      expect_matches(got32, ref, kRelTolF32, what + " float32");
    }
  print_worst();
}

void check_reference_models(const at::Device& device) {
  for (const std::string model : {"scalar_l0", "small_l1", "large_l2"}) {
    const MaceParams m = MaceParams::load(ModelFile::load(exported_model(model)), at::kDouble, at::kCPU);
    for (std::size_t t = 0; t < m.layers.size(); ++t)
      check_layout(m.layers[t].in, m.sh, m.layers[t].tp, device, 100 + t, model + " layer " + std::to_string(t));
  }
}

void check_random_layouts(const at::Device& device) {
  std::mt19937 rng(2024);
  for (int k = 0; k < 12; ++k) {
    const RandomLayout r = random_layout(rng);
    check_layout(r.in1, r.sh, r.layout, device, 1000 + 10 * k,
                 r.in1.str() + " x " + r.sh.str() + " -> " + r.layout.mid.str());
  }
}

std::vector<NamedLayout> specializable_layouts() {
  std::vector<NamedLayout> out;
  const auto add = [&](const std::string& in, int lmax, const std::string& target) {
    const Irreps in1 = Irreps::parse(in), sh = Irreps::spherical_harmonics(lmax);
    out.push_back({in + " x sh" + std::to_string(lmax) + " -> " + target, in1, sh,
                   conv_tp_layout(in1, sh, Irreps::parse(target))});
  };
  add("32x0e", 3, "0e+1o+2e+3o");
  add("64x0e+64x1o", 3, "0e+1o+2e+3o");
  add("32x0e+32x1o+32x2e", 2, "0e+1o+2e");
  add("32x1o+32x1e", 1, "0e+1o+1e");
  return out;
}

void check_radial_index(const at::Device& device, bool specialize) {
  const Irreps in1 = Irreps::parse("32x0e+32x1o"), sh = Irreps::spherical_harmonics(3);
  const ConvTPLayout layout = conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e+3o"));
  const ConvTPProblem p = make_conv_tp_problem(in1, sh, layout, {3, 0, 5, 1, 7, 2}, 9, 21);
  const int64_t E = p.Y.size(0), U = 6;
  const at::Tensor shared = p.R.narrow(0, 0, U).clone();
  const at::Tensor index = at::remainder(at::arange(E, p.xindex.options()) * 5, U);
  // Rows shared by at most two edges (reverse-edge pairs), for dR summed per row, and three rows no
  // edge uses (as padding rows), whose dR must come out zero.
  const int64_t pairs = (E + 1) / 2;
  const at::Tensor pair_rows = p.R.narrow(0, 0, pairs + 3).clone();
  const at::Tensor pair_index = at::div(at::randperm(E, p.xindex.options()), 2, "floor");
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    const auto options = at::TensorOptions().dtype(dtype).device(device);
    {
      const auto [expanded, indexed] = share_radial_rows(p, shared, index, options);
      const Results a = run_kernels(expanded, specialize), b = run_kernels(indexed, specialize, index.to(device));
      EXPECT_TRUE(at::equal(a.agg, b.agg)) << dtype;
      EXPECT_TRUE(at::equal(a.dR, b.dR)) << dtype;
      EXPECT_TRUE(at::equal(a.dY, b.dY)) << dtype;
      EXPECT_TRUE(at::equal(a.dx, b.dx)) << dtype;
    }
    // dR summed per row is the per-edge dR added up in edge order, bit for bit, whatever order the
    // device adds in. On the CPU with several threads, an edge after one of another thread's part in
    // its row waits in a row of its own, added after the parts; one within a part is summed at once.
    // Rows of two edges (reverse-edge pairs, the CUDA kernels' limit) and, on the CPU, of many.
    const int threads = at::get_num_threads();
    for (const bool many : {false, true}) {
      if (many && !device.is_cpu()) continue;
      const int64_t rows = many ? U : pairs + 3;
      const at::Tensor& row_index = many ? index : pair_index;
      const auto [expanded, indexed] = share_radial_rows(p, many ? shared : pair_rows, row_index, options);
      for (const int n : {1, 2, 3}) {
        at::set_num_threads(n);
        const Results a = run_kernels(expanded, specialize),
                      b = run_kernels(indexed, specialize, row_index.to(device), /*dR_by_row=*/true);
        const at::Tensor summed =
            at::zeros({rows, a.dR.size(1)}, a.dR.options().device(at::kCPU)).index_add_(0, row_index, a.dR.cpu());
        const std::string what = std::string(c10::toString(dtype)) + ", " + std::to_string(n) + " threads" +
                                 (many ? ", rows of many edges" : "");
        EXPECT_EQ(b.dR.size(0), rows) << what;
        EXPECT_TRUE(at::equal(b.dR.cpu(), summed)) << what;
        EXPECT_TRUE(at::equal(a.agg, b.agg)) << what;
        EXPECT_TRUE(at::equal(a.dY, b.dY)) << what;
        EXPECT_TRUE(at::equal(a.dx, b.dx)) << what;
      }
    }
    at::set_num_threads(threads);
  }
}

void check_thread_counts() {
  const Irreps in1 = Irreps::parse("24x0e+24x1o"), sh = Irreps::spherical_harmonics(3);
  const ConvTPLayout layout = conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e+3o"));
  std::vector<int64_t> counts;
  for (int64_t r = 0; r < 40; ++r) counts.push_back(r % 9 == 4 ? 0 : 4 + r % 7);
  // near: row r's edges send from x rows r .. r + 11, so that each part's window is a slice of x
  ConvTPProblem near = make_conv_tp_problem(in1, sh, layout, counts, 52, 31);
  near.xindex = near.receiver + at::remainder(at::arange(near.receiver.size(0), near.receiver.options()) * 7, 12);
  const ConvTPProblem far = make_conv_tp_problem(in1, sh, layout, counts, 52, 32);
  const int threads = at::get_num_threads();
  for (const auto& [name, p] : {std::pair<std::string, const ConvTPProblem*>{"senders near", &near}, {"senders anywhere", &far}}) {
    const ConvTPReference ref = conv_tp_reference(*p);
    for (const int n : {1, 2, 3}) {
      at::set_num_threads(n);
      for (const auto& [dtype, tol] : {std::pair<at::ScalarType, double>{at::kDouble, kRelTolF64}, {at::kFloat, kRelTolF32}}) {
        const ConvTPProblem q = convert(*p, at::TensorOptions().dtype(dtype));
        const std::string what = name + ", " + std::to_string(n) + " threads, " + c10::toString(dtype);
        const Results a = run_kernels(q), b = run_kernels(q);
        expect_matches(a, ref, tol, what);
        EXPECT_TRUE(at::equal(a.dx, b.dx) && at::equal(a.dR, b.dR) && at::equal(a.dY, b.dY)) << what << ": not repeated bit for bit";
      }
    }
  }
  at::set_num_threads(threads);
  print_worst();
}

}  // namespace flashmace::testing
