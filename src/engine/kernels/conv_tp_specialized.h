#pragma once
// The specialised conv TP kernels of one layer (conv_tp_codegen.h), compiled by NVRTC for the
// current GPU (jit/module.h: NVRTC, its disk cache, the driver API) and launched
// on the caller's stream. Torch-free: the caller owns every buffer, including the backward pass's
// scratch (dYp, dxe, the forward's parts: sizes below).
#include <memory>
#include <string>

#include "engine/kernels/conv_tp_descriptor.h"
#include "engine/kernels/conv_tp_kernels.h"

namespace flashmace {

class ConvTPSpecialized {
 public:
  // nullptr, with the reason in *why_not, when the layer is not specialisable or NVRTC, the driver or
  // the compilation fails (the generic kernels then run).
  static std::unique_ptr<ConvTPSpecialized> create(const ConvTPDescriptor& d, std::string* why_not);
  virtual ~ConvTPSpecialized() = default;

  int dy_scratch_columns() const { return dy_parts_ * dy_padded_; }  // dYp is [E, dy_scratch_columns]
  int dx_scratch_columns() const { return dim_in1_; }                 // dxe is [E, dim_in1] (with dx only)
  const std::string& arch() const { return arch_; }

  // Threads per row, path group and channel in the forward pass for nrows rows (more than one when the rows
  // alone would leave the GPU idle); with more than one, forward needs `part`, scratch of
  // forward_scratch(nrows) doubles.
  int forward_splits(long long nrows) const;
  long long forward_scratch(long long nrows) const;
  template <typename T>
  void forward(const ConvTPEdges<T>& g, T* agg, double* part, void* stream) const;
  // As conv_tp_backward_cuda; dYp and (when d.dx is set) dxe are scratch of the sizes above.
  template <typename T>
  void backward(const ConvTPEdges<T>& g, const ConvTPGradients<T>& d, T* dYp, T* dxe, void* stream) const;

 protected:
  ConvTPSpecialized() = default;
  int channels_ = 0, dim_in1_ = 0, dim_sh_ = 0, dim_mid_ = 0, dy_parts_ = 0, dy_padded_ = 0, forward_groups_ = 1;
  std::string arch_;
  // Launches kernel `name` (without the _f32/_f64 suffix) over `threads` threads.
  virtual void launch(const std::string& name, bool f64, long long threads, void** args, void* stream) const = 0;
};

}  // namespace flashmace
