// Times the generic CPU SC executor against the reference SC (one thread, as the numbers go into
// reports): sc_cpu_bench MODEL [ATOMS] [REPEATS]. Prints the descriptor, op counts and timings.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "core/model_file.h"
#include "sc/sc_cpu_executor.h"
#include "sc/sc_descriptor.h"
#include "sc_test_support.h"

using namespace flashmace;

namespace {

template <typename F>
double seconds_per_call(int repeats, F&& f) {
  f();  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / repeats;
}

template <typename T>
void time_executor(const ScDescriptor& d, const at::Tensor& A64, const at::Tensor& species, int repeats,
                   double ref_fwd, double ref_fwd_bwd) {
  const at::Tensor A = A64.to(std::is_same_v<T, float> ? at::kFloat : at::kDouble).contiguous();
  const int64_t n = A.size(0);
  at::Tensor B = at::empty({n, d.out_dim}, A.options()), dA = at::empty_like(A), dB = at::randn_like(B);
  const ScCpuExecutor<T> ex(d);
  const double fwd = seconds_per_call(repeats, [&] {
    ex.forward(A.data_ptr<T>(), species.data_ptr<int64_t>(), n, B.data_ptr<T>());
  });
  const double bwd = seconds_per_call(repeats, [&] {
    ex.backward(A.data_ptr<T>(), species.data_ptr<int64_t>(), dB.data_ptr<T>(), n, dA.data_ptr<T>());
  });
  std::printf("  generic %s: forward %.2f ms (%.1fx reference), backward %.2f ms, forward+backward %.1fx reference\n",
              std::is_same_v<T, float> ? "float32" : "float64", fwd * 1e3, ref_fwd / fwd, bwd * 1e3,
              ref_fwd_bwd / (fwd + bwd));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sc_cpu_bench MODEL [ATOMS] [REPEATS]\n");
    return 2;
  }
  const int64_t atoms = argc > 2 ? std::atoll(argv[2]) : 1000;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  at::set_num_threads(1);
  const ModelFile file = ModelFile::load(argv[1]);
  std::printf("%s, %lld atoms, 1 thread\n", argv[1], static_cast<long long>(atoms));
  for (int t = 0; t < file.config().num_interactions; ++t) {
    const ScDescriptor d = build_sc_descriptor(file, t);
    std::printf("%s", describe(d).c_str());
    // Per (atom, channel): unfolded = terms + M * paths multiply-adds (what the executors do);
    // species-folded = one multiply-add per distinct (m, monomial) pair, from a [Z, (m, monomial), C] table.
    std::size_t unfolded = 0, folded = 0, folded_table = 0;
    for (const ScBlock& b : d.blocks) {
      std::set<std::pair<int, int>> pairs;
      for (const ScTerm& term : b.terms) pairs.insert({term.m, term.mono});
      unfolded += b.terms.size() + static_cast<std::size_t>(b.dim()) * b.total_paths;
      folded += pairs.size();
      folded_table += pairs.size() * d.num_elements * d.channels;
    }
    std::printf("  MACs per atom and channel: unfolded %zu (+%zu monomial products), species-folded %zu; "
                "folded table %.1f MB in float32 vs weights %.1f MB\n",
                unfolded, d.monomials.size(), folded, folded_table * 4e-6,
                [&] { double s = 0; for (const auto& b : d.blocks) s += b.weights.size(); return s * 4e-6; }());

    const flashmace::testing::ScInputs in = flashmace::testing::random_sc_inputs(file, t, atoms, 1);
    const flashmace::testing::ReferenceSc reference(file, t, in.A.options());
    const double ref_fwd = seconds_per_call(repeats, [&] { reference(in.A, in.species); });
    const at::Tensor A = in.A.clone().requires_grad_(true);
    const double ref_fwd_bwd = seconds_per_call(repeats, [&] {
      const at::Tensor B = reference(A, in.species);
      B.backward(at::ones_like(B));
    });
    std::printf("  reference float64: forward %.2f ms, forward+backward %.2f ms\n", ref_fwd * 1e3, ref_fwd_bwd * 1e3);
    time_executor<double>(d, in.A, in.species, repeats, ref_fwd, ref_fwd_bwd);
    time_executor<float>(d, in.A, in.species, repeats, ref_fwd, ref_fwd_bwd);
  }
  return 0;
}
