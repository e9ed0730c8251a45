// Generic CUDA executor of any ScDescriptor: the polynomial of sc_descriptor.h read from device
// tables. One thread per (atom i, channel c), kThreads per block; the thread's A[i, c, :] (and in
// the backward its dA) sit in shared memory as [K][kThreads] so terms can index them.
//   forward:  B[i, c, m] = sum over (P, m) groups of W[z_i, P, c] * sum_terms coeff * prod_q a[k_q]
//   backward: dA[i, c, k] = sum_terms coeff * W[z_i, P, c] * dB[i, c, m] * d(prod_q a[k_q]) / d a[k]
// Terms are sorted by (path, m) within a block, so each weight is read once per group.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <vector>

#include "core/error.h"
#include "sc/sc_codegen.h"
#include "sc/sc_cuda_executor.h"

namespace flashmace {

namespace {

constexpr int kThreads = 64;
constexpr int kMaxDegree = 4;       // four 8-bit component indices packed per term
constexpr unsigned kNoIndex = 0xff;

struct BlockInfo {
  int dim, out_offset, term_begin, term_end;
};

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(std::string("generic CUDA SC executor: ") + what + ": " + cudaGetErrorString(rc));
}

template <typename T>
__device__ T monomial(unsigned k, const T* a) {
  T v = a[(k & 0xff) * kThreads];
  for (int q = 1; q < kMaxDegree; ++q) {
    const unsigned kq = (k >> (8 * q)) & 0xff;
    if (kq != kNoIndex) v *= a[kq * kThreads];
  }
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sc_generic_forward(const T* __restrict__ A, const long long* __restrict__ species, const T* __restrict__ W,
                       const BlockInfo* __restrict__ blocks, int num_blocks, const unsigned* __restrict__ term_k,
                       const int* __restrict__ term_pm, const T* __restrict__ term_coeff, int K, int C, int Z, int PW,
                       int out_dim, T* __restrict__ B, long long n) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* a = reinterpret_cast<T*>(smem) + threadIdx.x;
  const long long tid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  if (tid >= n * C) return;  // whole threads only: no __syncthreads below, each uses its own column
  const long long i = tid / C;
  const int c = static_cast<int>(tid % C);
  const long long z = species[i];
  T* b = B + i * out_dim + c;
  const bool bad = z < 0 || z >= Z;
  for (int k = 0; k < K; ++k) a[k * kThreads] = A[tid * K + k];
  const T* w = W + (bad ? 0 : z) * static_cast<long long>(PW) * C + c;
  for (int o = 0; o < num_blocks; ++o) {
    const BlockInfo blk = blocks[o];
    T* out = a + K * kThreads;
    for (int m = 0; m < blk.dim; ++m) out[m * kThreads] = T(0);
    int cur = -1;
    T s = T(0);
    for (int t = blk.term_begin; t < blk.term_end; ++t) {
      const int pm = term_pm[t];
      if (pm != cur) {
        if (cur >= 0) out[(cur & 31) * kThreads] += w[static_cast<long long>(cur >> 5) * C] * s;
        cur = pm;
        s = T(0);
      }
      s += term_coeff[t] * monomial(term_k[t], a);
    }
    if (cur >= 0) out[(cur & 31) * kThreads] += w[static_cast<long long>(cur >> 5) * C] * s;
    for (int m = 0; m < blk.dim; ++m) b[blk.out_offset + blk.dim * c - c + m] = bad ? T(0) / T(0) : out[m * kThreads];
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sc_generic_backward(const T* __restrict__ A, const long long* __restrict__ species, const T* __restrict__ W,
                        const BlockInfo* __restrict__ blocks, int num_blocks, const unsigned* __restrict__ term_k,
                        const int* __restrict__ term_pm, const T* __restrict__ term_coeff, int K, int C, int Z, int PW,
                        int out_dim, const T* __restrict__ dB, T* __restrict__ dA, long long n) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* a = reinterpret_cast<T*>(smem) + threadIdx.x;
  T* da = a + K * kThreads;
  const long long tid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  if (tid >= n * C) return;
  const long long i = tid / C;
  const int c = static_cast<int>(tid % C);
  const long long z = species[i];
  const bool bad = z < 0 || z >= Z;
  for (int k = 0; k < K; ++k) {
    a[k * kThreads] = A[tid * K + k];
    da[k * kThreads] = T(0);
  }
  const T* w = W + (bad ? 0 : z) * static_cast<long long>(PW) * C + c;
  const T* db = dB + i * out_dim + c;
  for (int o = 0; o < num_blocks; ++o) {
    const BlockInfo blk = blocks[o];
    int cur = -1;
    T g = T(0);
    for (int t = blk.term_begin; t < blk.term_end; ++t) {
      const int pm = term_pm[t];
      if (pm != cur) {
        cur = pm;
        g = w[static_cast<long long>(cur >> 5) * C] * db[blk.out_offset + blk.dim * c - c + (cur & 31)];
      }
      const unsigned k = term_k[t];
      const T gt = term_coeff[t] * g;
      // d/da[k_q] of the product: the product of the other factors.
      for (int q = 0; q < kMaxDegree; ++q) {
        const unsigned kq = (k >> (8 * q)) & 0xff;
        if (kq == kNoIndex) break;
        T others = gt;
        for (int r = 0; r < kMaxDegree; ++r) {
          const unsigned kr = (k >> (8 * r)) & 0xff;
          if (r != q && kr != kNoIndex) others *= a[kr * kThreads];
        }
        da[kq * kThreads] += others;
      }
    }
  }
  for (int k = 0; k < K; ++k) dA[tid * K + k] = bad ? T(0) / T(0) : da[k * kThreads];
}

template <typename T>
class GenericCudaSc final : public ScCudaExecutor<T> {
 public:
  explicit GenericCudaSc(const ScDescriptor& d)
      : K_(d.num_components), C_(d.channels), Z_(d.num_elements), PW_(packed_weight_paths(d)), out_dim_(d.out_dim) {
    std::vector<BlockInfo> blocks;
    std::vector<unsigned> term_k;
    std::vector<int> term_pm;
    std::vector<T> term_coeff;
    int path_offset = 0;
    for (const ScBlock& blk : d.blocks) {
      max_dim_ = std::max(max_dim_, blk.dim());
      std::map<std::pair<int, int>, std::vector<const ScTerm*>> groups;  // (path, m) order
      for (const ScTerm& t : blk.terms) groups[{t.path, t.m}].push_back(&t);
      BlockInfo info{blk.dim(), blk.out_offset, static_cast<int>(term_k.size()), 0};
      for (const auto& [key, terms] : groups)
        for (const ScTerm* t : terms) {
          unsigned packed = 0xffffffffu;
          const auto& k = d.monomials[t->mono].k;
          for (std::size_t q = 0; q < k.size(); ++q) packed = (packed & ~(0xffu << (8 * q))) | (unsigned(k[q]) << (8 * q));
          term_k.push_back(packed);
          term_pm.push_back(((path_offset + key.first) << 5) | key.second);
          term_coeff.push_back(static_cast<T>(t->coeff));
        }
      info.term_end = static_cast<int>(term_k.size());
      blocks.push_back(info);
      path_offset += blk.total_paths;
    }
    num_blocks_ = static_cast<int>(blocks.size());
    upload(blocks, &blocks_);
    upload(term_k, &term_k_);
    upload(term_pm, &term_pm_);
    upload(term_coeff, &term_coeff_);
    upload(pack_sc_weights<T>(d), &weights_);
  }
  ~GenericCudaSc() override {
    for (void* p : {static_cast<void*>(blocks_), static_cast<void*>(term_k_), static_cast<void*>(term_pm_),
                    static_cast<void*>(term_coeff_), static_cast<void*>(weights_)})
      if (p) cudaFree(p);
  }
  GenericCudaSc(const GenericCudaSc&) = delete;
  GenericCudaSc& operator=(const GenericCudaSc&) = delete;

  void forward(const T* A, const int64_t* species, int64_t n, T* B, void* stream) const override {
    if (n == 0) return;
    const std::size_t smem = static_cast<std::size_t>(K_ + max_dim_) * kThreads * sizeof(T);
    sc_generic_forward<T><<<grid(n), kThreads, smem, static_cast<cudaStream_t>(stream)>>>(
        A, reinterpret_cast<const long long*>(species), weights_, blocks_, num_blocks_, term_k_, term_pm_, term_coeff_,
        K_, C_, Z_, PW_, out_dim_, B, n);
    check(cudaGetLastError(), "launching the forward kernel");
  }
  void backward(const T* A, const int64_t* species, const T* dB, int64_t n, T* dA, void* stream) const override {
    if (n == 0) return;
    const std::size_t smem = static_cast<std::size_t>(2 * K_) * kThreads * sizeof(T);
    sc_generic_backward<T><<<grid(n), kThreads, smem, static_cast<cudaStream_t>(stream)>>>(
        A, reinterpret_cast<const long long*>(species), weights_, blocks_, num_blocks_, term_k_, term_pm_, term_coeff_,
        K_, C_, Z_, PW_, out_dim_, dB, dA, n);
    check(cudaGetLastError(), "launching the backward kernel");
  }
  std::string name() const override { return "generic"; }

 private:
  unsigned grid(int64_t n) const { return static_cast<unsigned>((n * C_ + kThreads - 1) / kThreads); }
  template <typename V, typename P>
  void upload(const std::vector<V>& host, P** device) {
    check(cudaMalloc(reinterpret_cast<void**>(device), std::max<std::size_t>(1, host.size()) * sizeof(V)),
          "allocating device tables");
    check(cudaMemcpy(*device, host.data(), host.size() * sizeof(V), cudaMemcpyHostToDevice), "copying device tables");
  }

  int K_, C_, Z_, PW_, out_dim_, max_dim_ = 1, num_blocks_ = 0;
  BlockInfo* blocks_ = nullptr;
  unsigned* term_k_ = nullptr;
  int* term_pm_ = nullptr;
  T* term_coeff_ = nullptr;
  T* weights_ = nullptr;
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
  if (d.correlation > kMaxDegree || d.num_components > 255) {
    *why_not = "the generic CUDA executor handles correlation <= 4 and at most 255 components per channel";
    return nullptr;
  }
  for (const ScBlock& b : d.blocks)
    if (b.dim() > 32) {
      *why_not = "the generic CUDA executor handles output irreps up to l = 15";
      return nullptr;
    }
  try {
    return std::make_unique<GenericCudaSc<T>>(d);
  } catch (const Error& e) {
    *why_not = e.what();
    return nullptr;
  }
}

template std::unique_ptr<ScCudaExecutor<float>> make_generic_cuda_sc<float>(const ScDescriptor&, std::string*);
template std::unique_ptr<ScCudaExecutor<double>> make_generic_cuda_sc<double>(const ScDescriptor&, std::string*);

}  // namespace flashmace
