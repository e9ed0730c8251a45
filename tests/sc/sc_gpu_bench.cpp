// Times the SC executors on a CUDA GPU: sc_gpu_bench MODEL [ATOMS] [REPEATS] [float32|float64].
// Per layer: reference SC (LibTorch, forward and autograd backward), generic CUDA and specialised
// executors (forward, backward), with ratios from this one run.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>

#include "core/model_file.h"
#include "model/device.h"
#include "sc/sc_cuda_executor.h"
#include "sc/sc_descriptor.h"
#include "sc_test_support.h"

using namespace flashmace;

namespace {

template <typename F>
double ms_per_call(int repeats, F&& f) {
  f();
  synchronize_device("cuda");
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) f();
  synchronize_device("cuda");
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / repeats;
}

template <typename T>
void run(const ModelFile& file, int64_t atoms, int repeats) {
  const at::ScalarType st = std::is_same_v<T, float> ? at::kFloat : at::kDouble;
  const auto cuda = at::TensorOptions().dtype(st).device(at::kCUDA);
  for (int t = 0; t < file.config().num_interactions; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    const ScDescriptor d = build_sc_descriptor(file, t);
    const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s  descriptor built in %.1f ms\n", describe(d).c_str(), build_ms);
    const flashmace::testing::ScInputs in = flashmace::testing::random_sc_inputs(file, t, atoms, 1);
    const at::Tensor A = in.A.to(cuda), species = in.species.to(at::kCUDA);
    const at::Tensor dB = at::randn({atoms, d.out_dim}, cuda);
    at::Tensor B = at::empty({atoms, d.out_dim}, cuda), dA = at::empty_like(A);

    const flashmace::testing::ReferenceSc reference(file, t, cuda);
    const double ref_f = ms_per_call(repeats, [&] { reference(A, species); });
    const at::Tensor Ag = A.clone().requires_grad_(true);
    const double ref_fb = ms_per_call(repeats, [&] { reference(Ag, species).backward(dB); });
    std::printf("  reference: forward %.3f ms, forward+backward %.3f ms\n", ref_f, ref_fb);

    std::string why;
    double generic_fb = 0;
    for (const auto kind : {ScExecutorKind::Generic, ScExecutorKind::Specialized}) {
      const auto c0 = std::chrono::steady_clock::now();
      const auto ex = make_cuda_sc_executor<T>(d, kind);
      const double make_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
      const double f = ms_per_call(repeats, [&] {
        ex->forward(A.data_ptr<T>(), species.data_ptr<int64_t>(), atoms, B.data_ptr<T>(), nullptr);
      });
      const double b = ms_per_call(repeats, [&] {
        ex->backward(A.data_ptr<T>(), species.data_ptr<int64_t>(), dB.data_ptr<T>(), atoms, dA.data_ptr<T>(), nullptr);
      });
      if (kind == ScExecutorKind::Generic) generic_fb = f + b;
      std::printf("  %-16s forward %.3f ms, backward %.3f ms; forward+backward %.1fx reference, %.1fx generic "
                  "(made in %.0f ms)\n",
                  ex->name().c_str(), f, b, ref_fb / (f + b), generic_fb / (f + b), make_ms);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sc_gpu_bench MODEL [ATOMS] [REPEATS] [float32|float64]\n");
    return 2;
  }
  if (!cuda_available()) {
    std::printf("sc_gpu_bench: no CUDA GPU on this machine\n");
    return 0;
  }
  const int64_t atoms = argc > 2 ? std::atoll(argv[2]) : 16384;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 20;
  const std::string dtype = argc > 4 ? argv[4] : "float32";
  const ModelFile file = ModelFile::load(argv[1]);
  std::printf("%s, %lld atoms, %s, %s\n", argv[1], static_cast<long long>(atoms), dtype.c_str(),
              device_name("cuda").c_str());
  if (dtype == "float64")
    run<double>(file, atoms, repeats);
  else
    run<float>(file, atoms, repeats);
  return 0;
}
