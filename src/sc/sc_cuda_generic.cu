// Generic CUDA executor of any ScDescriptor: the per-thread computation of sc_generic_tables.h
// (what it computes, and the table layout) over device copies of the tables. One thread per
// (atom i, channel c), kThreads per block; each thread keeps its a[k] (and dA[k] or its block's
// outputs) in its own column of shared memory, [K + ...][kThreads], so terms can index them.
// No __syncthreads: threads never read each other's columns.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "sc/sc_cuda_executor.h"
#include "sc/sc_generic_tables.h"

namespace flashmace {

namespace {

using sc_detail::GenericBlock;
using sc_detail::GenericHostTables;
using sc_detail::GenericTables;

constexpr int kThreads = 64;

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(std::string("generic CUDA SC executor: ") + what + ": " + cudaGetErrorString(rc));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sc_generic_forward(GenericTables<T> t, const T* __restrict__ A, const long long* __restrict__ species,
                       T* __restrict__ B, long long n) {
  extern __shared__ __align__(16) unsigned char smem[];
  const long long tid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  if (tid >= n * t.C) return;
  sc_detail::generic_forward_thread(t, A, species, B, tid, reinterpret_cast<T*>(smem) + threadIdx.x, kThreads);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sc_generic_backward(GenericTables<T> t, const T* __restrict__ A, const long long* __restrict__ species,
                        const T* __restrict__ dB, T* __restrict__ dA, long long n) {
  extern __shared__ __align__(16) unsigned char smem[];
  const long long tid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  if (tid >= n * t.C) return;
  sc_detail::generic_backward_thread(t, A, species, dB, dA, tid, reinterpret_cast<T*>(smem) + threadIdx.x, kThreads);
}

// A device copy of a host vector, freed with the owner.
template <typename V>
struct DeviceArray {
  V* ptr = nullptr;
  explicit DeviceArray(const std::vector<V>& host) {
    check(cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<std::size_t>(1, host.size()) * sizeof(V)),
          "allocating device tables");
    if (const cudaError_t rc = cudaMemcpy(ptr, host.data(), host.size() * sizeof(V), cudaMemcpyHostToDevice);
        rc != cudaSuccess) {
      cudaFree(ptr);
      check(rc, "copying device tables");
    }
  }
  ~DeviceArray() {
    if (ptr) cudaFree(ptr);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

template <typename T>
class GenericCudaSc final : public ScCudaExecutor<T> {
 public:
  explicit GenericCudaSc(const GenericHostTables<T>& host)
      : blocks_(host.blocks),
        term_k_(host.term_k),
        term_pm_(host.term_pm),
        term_coeff_(host.term_coeff),
        W_(host.W),
        in_base_(host.in_base),
        in_stride_(host.in_stride) {
    tables_ = host.view();
    tables_.blocks = blocks_.ptr;
    tables_.term_k = term_k_.ptr;
    tables_.term_pm = term_pm_.ptr;
    tables_.term_coeff = term_coeff_.ptr;
    tables_.W = W_.ptr;
    tables_.in_base = in_base_.ptr;
    tables_.in_stride = in_stride_.ptr;
  }

  void forward(const T* A, const int64_t* species, int64_t n, T* B, void* stream) const override {
    if (n == 0) return;
    const std::size_t smem = static_cast<std::size_t>(tables_.K + tables_.max_dim) * kThreads * sizeof(T);
    sc_generic_forward<T><<<grid(n), kThreads, smem, static_cast<cudaStream_t>(stream)>>>(
        tables_, A, reinterpret_cast<const long long*>(species), B, n);
    check(cudaGetLastError(), "launching the forward kernel");
  }
  void backward(const T* A, const int64_t* species, const T* dB, int64_t n, T* dA, void* stream) const override {
    if (n == 0) return;
    const std::size_t smem = static_cast<std::size_t>(2 * tables_.K) * kThreads * sizeof(T);
    sc_generic_backward<T><<<grid(n), kThreads, smem, static_cast<cudaStream_t>(stream)>>>(
        tables_, A, reinterpret_cast<const long long*>(species), dB, dA, n);
    check(cudaGetLastError(), "launching the backward kernel");
  }
  std::string name() const override { return "generic"; }

 private:
  unsigned grid(int64_t n) const { return static_cast<unsigned>((n * tables_.C + kThreads - 1) / kThreads); }

  DeviceArray<GenericBlock> blocks_;
  DeviceArray<unsigned> term_k_;
  DeviceArray<int> term_pm_;
  DeviceArray<T> term_coeff_;
  DeviceArray<T> W_;
  DeviceArray<int> in_base_, in_stride_;
  GenericTables<T> tables_{};
};

}  // namespace

template <typename T>
std::unique_ptr<ScCudaExecutor<T>> make_generic_cuda_sc(const ScDescriptor& d, std::string* why_not) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    *why_not = "no CUDA GPU on this machine";
    return nullptr;
  }
  if (const std::string why = sc_detail::generic_unsupported(d); !why.empty()) {
    *why_not = why;
    return nullptr;
  }
  try {
    return std::make_unique<GenericCudaSc<T>>(sc_detail::build_generic_tables<T>(d));
  } catch (const Error& e) {
    *why_not = e.what();
    return nullptr;
  }
}

template std::unique_ptr<ScCudaExecutor<float>> make_generic_cuda_sc<float>(const ScDescriptor&, std::string*);
template std::unique_ptr<ScCudaExecutor<double>> make_generic_cuda_sc<double>(const ScDescriptor&, std::string*);

}  // namespace flashmace
