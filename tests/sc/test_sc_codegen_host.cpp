// The generated kernels compute what the generic CPU executor computes: the CUDA source is compiled
// for the host by the C++ compiler CMake used (a few macros stand in for CUDA's keywords and the
// thread indices), loaded with dlopen and run thread by thread. This checks the generator's
// arithmetic and indexing on machines without a GPU; the GPU tests check it on the device.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "core/model_file.h"
#include "sc/sc_codegen.h"
#include "sc/sc_cpu_executor.h"
#include "sc/sc_descriptor.h"
#include "sc_test_support.h"
#include "test_support.h"

namespace flashmace {
namespace {

const char* kHostPrelude = R"(// host stand-ins for CUDA
struct flashmace_dim3 { unsigned x = 0, y = 0, z = 0; };
flashmace_dim3 blockIdx, threadIdx, blockDim;
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(n)
#define __restrict__ __restrict
extern "C" void flashmace_set_thread(unsigned block, unsigned thread, unsigned threads) {
  blockIdx.x = block; threadIdx.x = thread; blockDim.x = threads;
}
)";

// The generated source as a host shared library.
class HostKernels {
 public:
  explicit HostKernels(const std::string& source) {
    const std::string base = "/tmp/flashmace_sc_host_" + std::to_string(getpid()) + "_" + std::to_string(counter_++);
    std::ofstream(base + ".cpp") << kHostPrelude << source;
    // -O0: the kernels are thousands of straight-line statements; optimising them costs more than running them.
    const std::string cmd = std::string(FLASHMACE_HOST_CXX) + " -std=c++17 -O0 -shared -fPIC -w " + base + ".cpp -o " +
                            base + ".so 2> " + base + ".log";
    const int rc = std::system(cmd.c_str());
    std::remove((base + ".cpp").c_str());
    if (rc != 0) {
      std::ifstream log(base + ".log");
      error_ = "host compile failed: " + std::string(std::istreambuf_iterator<char>(log), {});
    } else {
      lib_ = dlopen((base + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!lib_) error_ = dlerror();
    }
    std::remove((base + ".so").c_str());
    std::remove((base + ".log").c_str());
  }
  ~HostKernels() {
    if (lib_) dlclose(lib_);
  }
  const std::string& error() const { return error_; }

  // Runs one kernel over n * C threads in blocks of kScThreadsPerBlock, like the GPU launch.
  template <typename... Args>
  void launch(const std::string& name, int64_t threads, Args... args) const {
    using Kernel = void (*)(Args...);
    const auto kernel = reinterpret_cast<Kernel>(dlsym(lib_, name.c_str()));
    const auto set_thread = reinterpret_cast<void (*)(unsigned, unsigned, unsigned)>(dlsym(lib_, "flashmace_set_thread"));
    ASSERT_TRUE(kernel && set_thread) << name;
    const int64_t padded = (threads + kScThreadsPerBlock - 1) / kScThreadsPerBlock * kScThreadsPerBlock;
    for (int64_t t = 0; t < padded; ++t) {
      set_thread(static_cast<unsigned>(t / kScThreadsPerBlock), static_cast<unsigned>(t % kScThreadsPerBlock),
                 kScThreadsPerBlock);
      kernel(args...);
    }
  }

 private:
  static inline int counter_ = 0;
  void* lib_ = nullptr;
  std::string error_;
};

template <typename T>
void check_model(const std::string& path, double rel_tol) {
  const at::ScalarType st = std::is_same_v<T, float> ? at::kFloat : at::kDouble;
  const std::string sfx = std::is_same_v<T, float> ? "_f32" : "_f64";
  const ModelFile file = ModelFile::load(path);
  for (int t = 0; t < file.config().num_interactions; ++t) {
    const ScDescriptor d = build_sc_descriptor(file, t);
    const HostKernels kernels(generate_sc_cuda_source(d));
    ASSERT_TRUE(kernels.error().empty()) << kernels.error();
    // 11 atoms: 11 * C threads is never a whole number of blocks here, so the bounds check runs.
    testing::ScInputs in = testing::random_sc_inputs(file, t, 11, 500 + t);
    in.species[4] = d.num_elements;  // outside [0, Z): NaN row
    const at::Tensor A = testing::executor_layout(d, in.A.to(st)).contiguous();  // (mul_ir rows)
    const int64_t n = A.size(0);
    const std::vector<T> W = pack_sc_weights<T>(d);
    const at::Tensor dB = at::randn({n, d.out_dim}, at::TensorOptions().dtype(st));
    at::Tensor B = at::zeros({n, d.out_dim}, A.options()), dA = at::zeros_like(A);
    const long long* species = reinterpret_cast<const long long*>(in.species.data_ptr<int64_t>());
    kernels.launch("sc_forward" + sfx, n * d.channels, static_cast<const T*>(A.data_ptr<T>()), species, W.data(),
                   B.data_ptr<T>(), static_cast<long long>(n));
    kernels.launch("sc_backward" + sfx, n * d.channels, static_cast<const T*>(A.data_ptr<T>()), species, W.data(),
                   static_cast<const T*>(dB.data_ptr<T>()), dA.data_ptr<T>(), static_cast<long long>(n));
    EXPECT_TRUE(at::isnan(B[4]).all().item<bool>()) << "layer " << t;
    EXPECT_TRUE(at::isnan(dA[4]).all().item<bool>()) << "layer " << t;

    // Oracle: the CPU executor on the atoms with valid species.
    const at::Tensor keep = at::arange(n) != 4;
    const at::Tensor A_ok = A.index({keep}).contiguous(), sp_ok = in.species.index({keep}).contiguous(),
                     dB_ok = dB.index({keep}).contiguous();
    at::Tensor B_cpu = at::empty_like(B.index({keep})), dA_cpu = at::empty_like(A_ok);
    const ScCpuExecutor<T> cpu(d);
    cpu.forward(A_ok.data_ptr<T>(), sp_ok.data_ptr<int64_t>(), n - 1, B_cpu.data_ptr<T>());
    cpu.backward(A_ok.data_ptr<T>(), sp_ok.data_ptr<int64_t>(), dB_ok.data_ptr<T>(), n - 1, dA_cpu.data_ptr<T>());
    EXPECT_TRUE(testing::all_close(B.index({keep}), B_cpu, rel_tol)) << "forward, layer " << t;
    EXPECT_TRUE(testing::all_close(dA.index({keep}), dA_cpu, rel_tol)) << "backward, layer " << t;
  }
}

class ScGeneratedOnHost : public ::testing::TestWithParam<std::string> {};

TEST_P(ScGeneratedOnHost, KernelsEqualTheCpuExecutorFloat64) { check_model<double>(GetParam(), testing::kRelTolF64); }
TEST_P(ScGeneratedOnHost, KernelsEqualTheCpuExecutorFloat32) { check_model<float>(GetParam(), testing::kRelTolF32); }

INSTANTIATE_TEST_SUITE_P(Models, ScGeneratedOnHost,
                         ::testing::Values(testing::sc_model("tiny-cuni"), testing::sc_model("sc-corr1-l2"),
                                           testing::sc_model("sc-corr3-l2"), testing::exported_model("scalar_l0"),
                                           testing::exported_model("large_l2")),
                         [](const auto& info) {
                           std::string s = info.param.substr(info.param.rfind('/') + 1);
                           s = s.substr(0, s.find('.'));
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace flashmace
