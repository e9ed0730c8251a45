// The specialised SC executor: sc_codegen.h's kernels for this model, compiled by NVRTC for the
// current GPU and launched through the driver API (one thread per (atom, channel), blocks of
// kScThreadsPerBlock threads; see sc_codegen.cpp for what each thread computes).
#include <type_traits>

#include "core/error.h"
#include "sc/sc_codegen.h"
#include "sc/sc_cuda_driver.h"
#include "sc/sc_cuda_executor.h"
#include "sc/sc_nvrtc.h"

namespace flashmace {

namespace {

namespace drv = cuda_driver;

template <typename T>
class SpecializedCudaSc final : public ScCudaExecutor<T> {
 public:
  SpecializedCudaSc(const ScDescriptor& d, const std::vector<char>& cubin, std::string arch)
      : channels_(d.channels), arch_(std::move(arch)) {
    const drv::Api& a = drv::api();
    drv::check(a.module_load_data(&module_, cubin.data()), "loading the SC kernels (cuModuleLoadData)");
    const std::string suffix = std::is_same_v<T, float> ? "_f32" : "_f64";
    try {
      drv::check(a.module_get_function(&forward_, module_, ("sc_forward" + suffix).c_str()), "cuModuleGetFunction");
      drv::check(a.module_get_function(&backward_, module_, ("sc_backward" + suffix).c_str()), "cuModuleGetFunction");
      const std::vector<T> w = pack_sc_weights<T>(d);
      drv::check(a.mem_alloc(&weights_, w.size() * sizeof(T)), "allocating the SC weights on the GPU");
      drv::check(a.memcpy_htod(weights_, w.data(), w.size() * sizeof(T)), "copying the SC weights to the GPU");
    } catch (...) {
      release();
      throw;
    }
  }
  ~SpecializedCudaSc() override { release(); }
  SpecializedCudaSc(const SpecializedCudaSc&) = delete;
  SpecializedCudaSc& operator=(const SpecializedCudaSc&) = delete;

  void forward(const T* A, const int64_t* species, int64_t n, T* B, void* stream) const override {
    long long atoms = n;
    void* args[] = {&A, &species, const_cast<drv::CUdeviceptr*>(&weights_), &B, &atoms};
    launch(forward_, n, args, stream, "sc_forward");
  }
  void backward(const T* A, const int64_t* species, const T* dB, int64_t n, T* dA, void* stream) const override {
    long long atoms = n;
    void* args[] = {&A, &species, const_cast<drv::CUdeviceptr*>(&weights_), &dB, &dA, &atoms};
    launch(backward_, n, args, stream, "sc_backward");
  }
  std::string name() const override { return "specialized " + arch_; }

 private:
  void launch(drv::CUfunction f, int64_t n, void** args, void* stream, const char* what) const {
    const int64_t threads = n * channels_;
    if (threads == 0) return;
    const int64_t blocks = (threads + kScThreadsPerBlock - 1) / kScThreadsPerBlock;
    drv::check(drv::api().launch_kernel(f, static_cast<unsigned>(blocks), 1, 1, kScThreadsPerBlock, 1, 1, 0,
                                        static_cast<drv::CUstream>(stream), args, nullptr),
               std::string("launching ") + what);
  }
  void release() noexcept {
    const drv::Api& a = drv::api();
    if (weights_) a.mem_free(weights_);
    if (module_) a.module_unload(module_);
    weights_ = 0;
    module_ = nullptr;
  }

  int channels_ = 0;
  std::string arch_;
  drv::CUmodule module_ = nullptr;
  drv::CUfunction forward_ = nullptr, backward_ = nullptr;
  drv::CUdeviceptr weights_ = 0;
};

}  // namespace

template <typename T>
std::unique_ptr<ScCudaExecutor<T>> make_specialized_cuda_sc(const ScDescriptor& d, std::string* why_not) {
  const drv::Api& a = drv::api();
  if (!a.error.empty()) {
    *why_not = a.error;
    return nullptr;
  }
  try {
    const std::string arch = drv::current_arch();
    const ScCubin cubin = compile_cubin(generate_sc_cuda_source(d), arch);
    if (!cubin) {
      *why_not = cubin.error;
      return nullptr;
    }
    return std::make_unique<SpecializedCudaSc<T>>(d, cubin.image, arch);
  } catch (const Error& e) {
    *why_not = e.what();
    return nullptr;
  }
}

template <typename T>
std::unique_ptr<ScCudaExecutor<T>> make_cuda_sc_executor(const ScDescriptor& d, ScExecutorKind kind) {
  std::string why_specialized, why_generic;
  if (kind != ScExecutorKind::Generic) {
    if (auto e = make_specialized_cuda_sc<T>(d, &why_specialized)) return e;
    if (kind == ScExecutorKind::Specialized)
      throw Error("sc specialized: the specialised symmetric-contraction kernels are not available: " +
                  why_specialized + " (use sc auto or sc generic)");
    sc_log_once("specialised symmetric contraction not available (" + why_specialized +
                "); using the generic CUDA executor");
  }
  if (auto e = make_generic_cuda_sc<T>(d, &why_generic)) return e;
  throw Error("no CUDA symmetric-contraction executor: " + why_generic +
              (why_specialized.empty() ? "" : "; specialised: " + why_specialized));
}

ScExecutorKind parse_sc_executor_kind(const std::string& text) {
  if (text == "auto") return ScExecutorKind::Auto;
  if (text == "specialized") return ScExecutorKind::Specialized;
  if (text == "generic") return ScExecutorKind::Generic;
  throw Error("Unknown SC executor '" + text + "': expected auto, specialized or generic");
}

template std::unique_ptr<ScCudaExecutor<float>> make_specialized_cuda_sc<float>(const ScDescriptor&, std::string*);
template std::unique_ptr<ScCudaExecutor<double>> make_specialized_cuda_sc<double>(const ScDescriptor&, std::string*);
template std::unique_ptr<ScCudaExecutor<float>> make_cuda_sc_executor<float>(const ScDescriptor&, ScExecutorKind);
template std::unique_ptr<ScCudaExecutor<double>> make_cuda_sc_executor<double>(const ScDescriptor&, ScExecutorKind);

}  // namespace flashmace
