#pragma once
// A module of generated CUDA kernels: compiled for the current GPU by NVRTC (through the disk
// cache, jit/nvrtc.h), loaded with the driver API (jit/cuda_driver.h) into the current context
// (LibTorch's, in the engine), its functions found by name once. The one compile-and-load sequence
// of every load-time specialised kernel family (sc/sc_cuda_specialized.cpp, the conv TP).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "jit/cuda_driver.h"
#include "jit/nvrtc.h"

namespace flashmace::jit {

class Module {
 public:
  // nullptr with *why_not set when the driver, NVRTC or the compilation is not available here
  // (the compile failure is also logged once, with use.fallback); throws nothing for those.
  static std::unique_ptr<Module> compile(const std::string& source, const std::vector<std::string>& functions,
                                         const JitUse& use, std::string* why_not);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& arch() const { return arch_; }  // "sm_90"
  // Launches `function` (one of those named at compile) on `stream` (a cudaStream_t; nullptr = the
  // legacy default stream) as blocks x threads; asynchronous. Throws flashmace::Error on driver errors.
  void launch(const std::string& function, long long blocks, int threads, void** args, void* stream) const;

 private:
  Module() = default;
  std::string arch_;
  cuda_driver::CUmodule module_ = nullptr;
  std::map<std::string, cuda_driver::CUfunction> functions_;
};

}  // namespace flashmace::jit
