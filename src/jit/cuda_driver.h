#pragma once
// The few CUDA driver API entry points the load-time specialised kernels (SC, conv TP) need, loaded
// from libcuda.so.1 at first use. Declared here (no cuda.h): results are ints (0 = CUDA_SUCCESS),
// handles are opaque pointers, device pointers are 64-bit integers.
#include <cstddef>
#include <string>

namespace flashmace::cuda_driver {

using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUdeviceptr = unsigned long long;

struct Api {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*ctx_get_device)(CUdevice*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                            void**, void**) = nullptr;
  std::string error;  // why the driver is unusable; empty when it is
};

constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeCapabilityMinor = 76;

const Api& api();  // loaded and cuInit'ed once
// Throws flashmace::Error "<what>: <driver message>" when rc is not CUDA_SUCCESS.
void check(CUresult rc, const std::string& what);
// The current context's device as "sm_XY" (the primary context of device 0 is made current first
// when the thread has none, as the CUDA runtime would). Throws flashmace::Error on driver errors.
std::string current_arch();

}  // namespace flashmace::cuda_driver
