// Compiles conv_tp_codegen.h's kernels for one layer (NVRTC, cached on disk) and launches them
// through the driver API (jit/module.h), so this file needs neither nvcc nor a GPU to build.
#include "engine/kernels/conv_tp_specialized.h"

#include <algorithm>
#include <memory>
#include <type_traits>

#include "core/error.h"
#include "engine/kernels/conv_tp_codegen.h"
#include "jit/module.h"

namespace flashmace {

namespace {

const char* const kKernels[] = {"tp_forward", "tp_forward_join", "tp_backward", "tp_backward_rows", "tp_dy_reduce",
                                "tp_dx_gather"};
constexpr long long kMaxSplits = 8;         // warps per row in the backward kernel
constexpr long long kMaxForwardSplits = 4;  // threads per row and channel in the forward kernel
// Enough threads to fill the GPU twice over (132 SMs x 2048 on an H200) when rows are few.
constexpr long long kTargetThreads = 2LL * 132 * 2048;

const JitUse kConvTPJit{"the conv TP kernels", "the conv TP runs on the table-driven CUDA kernels"};

class LoadedConvTP final : public ConvTPSpecialized {
 public:
  LoadedConvTP(const ConvTPDescriptor& d, std::unique_ptr<jit::Module> module) : module_(std::move(module)) {
    channels_ = d.max_mul;
    dim_in1_ = d.dim_in1;
    dim_sh_ = d.dim_sh;
    dim_mid_ = d.dim_mid;
    dy_parts_ = conv_tp_dy_parts(d);
    dy_padded_ = conv_tp_dy_padded(d);
    forward_groups_ = conv_tp_forward_groups(d);
    arch_ = module_->arch();
  }

 private:
  void launch(const std::string& name, bool f64, long long threads, void** args, void* stream) const override {
    const long long blocks = (threads + kConvTPSpecializedThreads - 1) / kConvTPSpecializedThreads;
    module_->launch(name + (f64 ? "_f64" : "_f32"), blocks, kConvTPSpecializedThreads, args, stream);
  }

  std::unique_ptr<jit::Module> module_;
};

}  // namespace

std::unique_ptr<ConvTPSpecialized> ConvTPSpecialized::create(const ConvTPDescriptor& d, std::string* why_not) {
  if (std::string why = conv_tp_specialization_unsupported(d); !why.empty()) {
    *why_not = why;
    return nullptr;
  }
  std::vector<std::string> functions;
  for (const char* k : kKernels)
    for (const char* suffix : {"_f32", "_f64"}) functions.push_back(std::string(k) + suffix);
  std::unique_ptr<jit::Module> module = jit::Module::compile(generate_conv_tp_cuda_source(d), functions, kConvTPJit, why_not);
  if (!module) return nullptr;
  return std::make_unique<LoadedConvTP>(d, std::move(module));
}

int ConvTPSpecialized::forward_splits(long long nrows) const {
  // Split until a quarter of kTargetThreads runs: more splits add a join kernel and its traffic. At
  // 4,000 atoms (one path group, 512,000 threads) two splits measured slower than one; at 864 atoms
  // in two groups (221,184 threads, about three waves of the kernel's 16 warps per SM) one split
  // was 1.5 % faster per step than two on an H100.
  const long long row_threads = std::max(1LL, nrows * channels_ * forward_groups_);
  return static_cast<int>(std::min(kMaxForwardSplits, (kTargetThreads / 4 + row_threads - 1) / row_threads));
}

long long ConvTPSpecialized::forward_scratch(long long nrows) const {
  const int splits = forward_splits(nrows);
  return splits > 1 ? splits * nrows * dim_mid_ : 0;
}

template <typename T>
void ConvTPSpecialized::forward(const ConvTPEdges<T>& g, T* agg, double* part, void* stream) const {
  const bool f64 = std::is_same_v<T, double>;
  const T* x = g.x;
  const long long* xindex = reinterpret_cast<const long long*>(g.xindex);
  const T *Y = g.Y, *R = g.R;
  const long long* rindex = reinterpret_cast<const long long*>(g.radial_index);
  const long long* row_ptr = reinterpret_cast<const long long*>(g.row_ptr);
  long long nrows = g.nrows;
  int splits = forward_splits(nrows);
  void* args[] = {&x, &xindex, &Y, &R, &rindex, &row_ptr, &agg, &part, &nrows, &splits};
  launch("tp_forward", f64, nrows * splits * forward_groups_ * channels_, args, stream);
  if (splits > 1) {
    const double* parts = part;
    void* join[] = {&parts, &agg, &nrows, &splits};
    launch("tp_forward_join", f64, nrows * dim_mid_, join, stream);
  }
}

template <typename T>
void ConvTPSpecialized::backward(const ConvTPEdges<T>& g, const ConvTPGradients<T>& d, T* dYp, T* dxe,
                                 void* stream) const {
  const bool f64 = std::is_same_v<T, double>;
  if (g.num_edges == 0) return;
  const T* x = g.x;
  const long long* xindex = reinterpret_cast<const long long*>(g.xindex);
  const T *Y = g.Y, *R = g.R, *dagg = d.dagg;
  const long long* rindex = reinterpret_cast<const long long*>(g.radial_index);
  const long long* row_ptr = reinterpret_cast<const long long*>(g.row_ptr);
  long long nrows = g.nrows, E = g.num_edges, num_x_rows = d.num_x_rows;
  T *dR = d.dR, *dY = d.dY, *dx = d.dx;
  T* dxe_or_null = dx ? dxe : nullptr;
  const long long row_threads = std::max(1LL, nrows * channels_);
  int splits = static_cast<int>(std::min<long long>(kMaxSplits, (kTargetThreads + row_threads - 1) / row_threads));
  void* bwd[] = {&x, &xindex, &Y, &R, &rindex, &row_ptr, &dagg, &dR, &dYp, &dxe_or_null, &nrows, &splits};
  launch(d.dR_by_radial_row && rindex ? "tp_backward_rows" : "tp_backward", f64, nrows * splits * channels_, bwd, stream);
  const T* dYp_in = dYp;
  void* reduce[] = {&dYp_in, &dY, &E};
  launch("tp_dy_reduce", f64, E * dim_sh_, reduce, stream);
  if (dx) {
    const T* dxe_in = dxe;
    const long long* x_perm = reinterpret_cast<const long long*>(d.x_perm);
    const long long* x_ptr = reinterpret_cast<const long long*>(d.x_ptr);
    const long long* x_rows = reinterpret_cast<const long long*>(d.x_rows);
    void* gather[] = {&dxe_in, &x_perm, &x_ptr, &x_rows, &dx, &num_x_rows};
    launch("tp_dx_gather", f64, num_x_rows * dim_in1_, gather, stream);
  }
}

template void ConvTPSpecialized::forward<float>(const ConvTPEdges<float>&, float*, double*, void*) const;
template void ConvTPSpecialized::forward<double>(const ConvTPEdges<double>&, double*, double*, void*) const;
template void ConvTPSpecialized::backward<float>(const ConvTPEdges<float>&, const ConvTPGradients<float>&, float*,
                                                 float*, void*) const;
template void ConvTPSpecialized::backward<double>(const ConvTPEdges<double>&, const ConvTPGradients<double>&,
                                                  double*, double*, void*) const;

}  // namespace flashmace
