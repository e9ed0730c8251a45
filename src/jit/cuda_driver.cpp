#include "jit/cuda_driver.h"

#include <dlfcn.h>

#include "core/error.h"

namespace flashmace::cuda_driver {

namespace {

template <typename F>
bool bind(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

Api load() {
  Api a;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    a.error = "the CUDA driver (libcuda.so.1) is not installed on this machine";
    return a;
  }
  // The _v2 names are the current ABI of these calls (cuda.h maps the plain names onto them).
  const bool all = bind(lib, "cuInit", &a.init) && bind(lib, "cuGetErrorString", &a.error_string) &&
                   bind(lib, "cuCtxGetCurrent", &a.ctx_get_current) && bind(lib, "cuCtxSetCurrent", &a.ctx_set_current) &&
                   bind(lib, "cuCtxGetDevice", &a.ctx_get_device) && bind(lib, "cuDeviceGet", &a.device_get) &&
                   bind(lib, "cuDeviceGetAttribute", &a.device_get_attribute) &&
                   bind(lib, "cuDevicePrimaryCtxRetain", &a.primary_ctx_retain) &&
                   bind(lib, "cuModuleLoadData", &a.module_load_data) &&
                   bind(lib, "cuModuleGetFunction", &a.module_get_function) &&
                   bind(lib, "cuModuleUnload", &a.module_unload) && bind(lib, "cuMemAlloc_v2", &a.mem_alloc) &&
                   bind(lib, "cuMemFree_v2", &a.mem_free) && bind(lib, "cuMemcpyHtoD_v2", &a.memcpy_htod) &&
                   bind(lib, "cuLaunchKernel", &a.launch_kernel);
  if (!all) {
    a.error = "the CUDA driver lacks an entry point flashmace needs (driver too old?)";
  } else if (const CUresult rc = a.init(0); rc != 0) {
    const char* msg = nullptr;
    a.error_string(rc, &msg);
    a.error = std::string("cuInit failed: ") + (msg ? msg : std::to_string(rc)) + " (no usable GPU?)";
  }
  return a;
}

}  // namespace

const Api& api() {
  static const Api a = load();
  return a;
}

void check(CUresult rc, const std::string& what) {
  if (rc == 0) return;
  const char* msg = nullptr;
  if (api().error_string) api().error_string(rc, &msg);
  throw Error(what + ": " + (msg ? msg : "CUDA driver error " + std::to_string(rc)));
}

std::string current_arch() {
  const Api& a = api();
  CUcontext ctx = nullptr;
  check(a.ctx_get_current(&ctx), "cuCtxGetCurrent");
  if (!ctx) {
    CUdevice dev = 0;
    check(a.device_get(&dev, 0), "cuDeviceGet(0)");
    check(a.primary_ctx_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(a.ctx_set_current(ctx), "cuCtxSetCurrent");
  }
  CUdevice dev = 0;
  check(a.ctx_get_device(&dev), "cuCtxGetDevice");
  int major = 0, minor = 0;
  check(a.device_get_attribute(&major, kAttrComputeCapabilityMajor, dev), "cuDeviceGetAttribute");
  check(a.device_get_attribute(&minor, kAttrComputeCapabilityMinor, dev), "cuDeviceGetAttribute");
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

}  // namespace flashmace::cuda_driver
