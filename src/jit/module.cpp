#include "jit/module.h"

#include "core/error.h"
#include "jit/cuda_driver.h"

namespace flashmace::jit {

namespace drv = cuda_driver;

std::unique_ptr<Module> Module::compile(const std::string& source, const std::vector<std::string>& functions,
                                        const JitUse& use, std::string* why_not) {
  const drv::Api& a = drv::api();
  if (!a.error.empty()) {
    *why_not = a.error;
    return nullptr;
  }
  try {
    std::unique_ptr<Module> m(new Module());
    m->arch_ = drv::current_arch();
    const Cubin cubin = compile_cubin(source, m->arch_, use);
    if (!cubin) {
      *why_not = cubin.error;
      return nullptr;
    }
    drv::check(a.module_load_data(&m->module_, cubin.image.data()),
               "loading " + use.kernels + " (cuModuleLoadData)");
    for (const std::string& name : functions) {
      drv::CUfunction f = nullptr;
      drv::check(a.module_get_function(&f, m->module_, name.c_str()), "cuModuleGetFunction(" + name + ")");
      m->functions_[name] = f;
    }
    return m;
  } catch (const Error& e) {
    *why_not = e.what();
    return nullptr;
  }
}

Module::~Module() {
  if (module_) drv::api().module_unload(module_);
}

void Module::launch(const std::string& function, long long blocks, int threads, void** args, void* stream) const {
  if (blocks <= 0) return;
  const auto f = functions_.find(function);
  if (f == functions_.end()) throw Error("jit::Module: no function " + function + " was loaded");
  drv::check(drv::api().launch_kernel(f->second, static_cast<unsigned>(blocks), 1, 1, static_cast<unsigned>(threads),
                                      1, 1, 0, static_cast<drv::CUstream>(stream), args, nullptr),
             "launching " + function);
}

}  // namespace flashmace::jit
