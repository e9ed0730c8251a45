// The specialised SC executor: sc_codegen.h's kernels for this model, compiled by NVRTC for the
// current GPU and launched through the driver API (one thread per (atom, channel), blocks of
// kScThreadsPerBlock threads; see sc_codegen.cpp for what each thread computes).
#include <type_traits>

#include "core/error.h"
#include "jit/cuda_driver.h"
#include "jit/module.h"
#include "sc/sc_codegen.h"
#include "sc/sc_cuda_executor.h"

namespace flashmace {

namespace {

namespace drv = cuda_driver;

const JitUse kScJit{"the SC kernels", "the symmetric contraction runs on the generic executor"};

std::string suffix_of(bool f64) { return f64 ? "_f64" : "_f32"; }

template <typename T>
class SpecializedCudaSc final : public ScCudaExecutor<T> {
 public:
  SpecializedCudaSc(const ScDescriptor& d, std::unique_ptr<jit::Module> module)
      : channels_(d.channels), module_(std::move(module)), suffix_(suffix_of(std::is_same_v<T, double>)) {
    const drv::Api& a = drv::api();
    const std::vector<T> w = pack_sc_weights<T>(d);
    drv::check(a.mem_alloc(&weights_, w.size() * sizeof(T)), "allocating the SC weights on the GPU");
    try {
      drv::check(a.memcpy_htod(weights_, w.data(), w.size() * sizeof(T)), "copying the SC weights to the GPU");
    } catch (...) {
      a.mem_free(weights_);
      throw;
    }
  }
  ~SpecializedCudaSc() override { drv::api().mem_free(weights_); }
  SpecializedCudaSc(const SpecializedCudaSc&) = delete;
  SpecializedCudaSc& operator=(const SpecializedCudaSc&) = delete;

  void forward(const T* A, const int64_t* species, int64_t n, T* B, void* stream) const override {
    long long atoms = n;
    void* args[] = {&A, &species, const_cast<drv::CUdeviceptr*>(&weights_), &B, &atoms};
    launch("sc_forward", n, args, stream);
  }
  void backward(const T* A, const int64_t* species, const T* dB, int64_t n, T* dA, void* stream) const override {
    long long atoms = n;
    void* args[] = {&A, &species, const_cast<drv::CUdeviceptr*>(&weights_), &dB, &dA, &atoms};
    launch("sc_backward", n, args, stream);
  }
  std::string name() const override { return "specialized " + module_->arch(); }

 private:
  void launch(const std::string& kernel, int64_t n, void** args, void* stream) const {
    const int64_t threads = n * channels_;
    const int64_t blocks = (threads + kScThreadsPerBlock - 1) / kScThreadsPerBlock;
    module_->launch(kernel + suffix_, blocks, kScThreadsPerBlock, args, stream);
  }

  int channels_ = 0;
  std::unique_ptr<jit::Module> module_;
  std::string suffix_;
  drv::CUdeviceptr weights_ = 0;
};

}  // namespace

template <typename T>
std::unique_ptr<ScCudaExecutor<T>> make_specialized_cuda_sc(const ScDescriptor& d, std::string* why_not) {
  const std::string suffix = suffix_of(std::is_same_v<T, double>);
  std::unique_ptr<jit::Module> module =
      jit::Module::compile(generate_sc_cuda_source(d), {"sc_forward" + suffix, "sc_backward" + suffix}, kScJit, why_not);
  if (!module) return nullptr;
  try {
    return std::make_unique<SpecializedCudaSc<T>>(d, std::move(module));
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
    jit_log_once("specialised symmetric contraction not available (" + why_specialized +
                "); using the generic CUDA executor");
  }
  if (auto e = make_generic_cuda_sc<T>(d, &why_generic)) return e;
  throw Error("no CUDA symmetric-contraction executor: " + why_generic +
              (why_specialized.empty() ? "" : "; specialised: " + why_specialized));
}

template std::unique_ptr<ScCudaExecutor<float>> make_specialized_cuda_sc<float>(const ScDescriptor&, std::string*);
template std::unique_ptr<ScCudaExecutor<double>> make_specialized_cuda_sc<double>(const ScDescriptor&, std::string*);
template std::unique_ptr<ScCudaExecutor<float>> make_cuda_sc_executor<float>(const ScDescriptor&, ScExecutorKind);
template std::unique_ptr<ScCudaExecutor<double>> make_cuda_sc_executor<double>(const ScDescriptor&, ScExecutorKind);

}  // namespace flashmace
