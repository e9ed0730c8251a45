// Forward + backward time of the fused conv TP kernels against the reference path
// (conv_tensor_product on gathered features + index_add + autograd), per layer of the tiny preset
// (108 atoms, ~42 edges each: ~4500 edges) and of a mid-size layer (128x0e+128x1o, l <= 3, 500 atoms
// x 36 edges). Prints the best of several runs and the ratio, on the CPU and, if present, the GPU.
// Usage: bench_conv_tp [model.safetensors] (default: potentials/testing/tiny-cuni-random.safetensors)
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>

#include <ATen/Parallel.h>

#include "core/model_file.h"
#include "engine/ops/conv_tp_op.h"
#include "engine/test_conv_tp_support.h"
#include "model/device.h"
#include "model/mace_params.h"
#include "test_support.h"

namespace flashmace {
namespace {

double best_seconds(const std::function<void()>& f, const std::string& device, int reps) {
  f();  // warm-up
  synchronize_device(device);
  double best = 1e30;
  for (int k = 0; k < reps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    synchronize_device(device);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

struct Timing {
  double fused = 0, reference = 0;
};

Timing time_layer(const testing::ConvTPProblem& p, bool need_dx, const std::string& device, int reps) {
  const ConvTPOp op(ConvTPDescriptor::build(p.in1, p.sh, p.layout), p.x.options());
  const XIndexCsr csr = xindex_csr(p.xindex, p.num_x);
  Timing t;
  t.fused = best_seconds(
      [&] {
        const at::Tensor agg = conv_tp_aggregate(op, p.x, p.xindex, p.Y, p.R, p.row_ptr, p.nrows);
        at::Tensor dx = need_dx ? at::zeros_like(p.x) : at::Tensor();
        conv_tp_aggregate_backward(op, p.dagg, p.x, p.xindex, p.Y, p.R, p.row_ptr, dx, csr);
      },
      device, reps);
  t.reference = best_seconds([&] { testing::conv_tp_reference(p); }, device, reps);
  return t;
}

testing::ConvTPProblem problem(const Irreps& in1, const Irreps& sh, const ConvTPLayout& layout, int64_t atoms,
                               int lo, int hi, int64_t num_x, uint64_t seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_int_distribution<int64_t> count(lo, hi);
  std::vector<int64_t> counts(atoms);
  for (auto& c : counts) c = count(rng);
  return testing::make_conv_tp_problem(in1, sh, layout, counts, num_x, seed);
}

void report(const char* what, int64_t edges, const std::string& device, const char* dtype, const Timing& t) {
  std::printf("%-34s %7lld edges  %-7s %-7s fused %9.3f ms  reference %9.3f ms  ratio %.2fx\n", what,
              static_cast<long long>(edges), device.c_str(), dtype, 1e3 * t.fused, 1e3 * t.reference,
              t.reference / t.fused);
}

void run(const std::string& model_path, const std::string& device, at::ScalarType dtype, int reps) {
  const at::TensorOptions o = at::TensorOptions().dtype(dtype).device(device);
  const char* dname = dtype == at::kDouble ? "float64" : "float32";
  const MaceParams m = MaceParams::load(ModelFile::load(model_path), at::kDouble, at::kCPU);
  Timing total;
  int64_t edges = 0;
  for (std::size_t t = 0; t < m.layers.size(); ++t) {
    const InteractionParams& L = m.layers[t];
    // Layer 0 reads the per-species table (no gradient); later layers the sender's features.
    const bool first = t == 0;
    const int64_t num_x = first ? m.config.num_elements() : 108;
    const testing::ConvTPProblem p =
        testing::convert(problem(L.in, m.sh, L.tp, 108, 35, 49, num_x, 7 + t), o);
    const Timing tl = time_layer(p, !first, device, reps);
    edges = p.Y.size(0);
    report(("tiny preset layer " + std::to_string(t) + " " + L.in.str()).c_str(), edges, device, dname, tl);
    total.fused += tl.fused;
    total.reference += tl.reference;
  }
  report("tiny preset, all layers", edges, device, dname, total);
  const Irreps in1 = Irreps::parse("128x0e+128x1o"), sh = Irreps::spherical_harmonics(3);
  const ConvTPLayout layout = conv_tp_layout(in1, sh, Irreps::parse("0e+1o+2e+3o"));
  const testing::ConvTPProblem p = testing::convert(problem(in1, sh, layout, 500, 30, 42, 500, 3), o);
  report("mid 128x0e+128x1o x sh(3)", p.Y.size(0), device, dname, time_layer(p, true, device, reps));
}

}  // namespace
}  // namespace flashmace

int main(int argc, char** argv) {
  const std::string model =
      argc > 1 ? argv[1] : std::string(FLASHMACE_SOURCE_DIR) + "/potentials/testing/tiny-cuni-random.safetensors";
  std::printf("threads: %d (at::get_num_threads), hardware threads %u\n", at::get_num_threads(),
              std::thread::hardware_concurrency());
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) flashmace::run(model, "cpu", dtype, 5);
  if (flashmace::cuda_available())
    for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) flashmace::run(model, "cuda:0", dtype, 20);
  return 0;
}
