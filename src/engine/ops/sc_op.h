#pragma once
// The symmetric contraction of one layer as the fast engine calls it: B = SC(A, species) and dA from
// dB (mace_spec.md 7), on tensors, by the executor chosen for the device: the generic CPU executor,
// or on CUDA the load-time specialised kernels (NVRTC) or the generic CUDA executor (sc/).
#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "sc/sc_cpu_executor.h"
#include "sc/sc_cuda_executor.h"
#include "sc/sc_descriptor.h"

namespace flashmace {

class ScOp {
 public:
  // kind: Specialized runs on CUDA only. Throws naming the reason when the kind cannot run on this
  // device.
  ScOp(const ScDescriptor& descriptor, const at::TensorOptions& options, ScExecutorKind kind);
  ~ScOp();
  ScOp(ScOp&&) noexcept;

  // a: [n, C K], the layer's node features in mul_ir (sc_cpu_executor.h), in the op's dtype and
  // device; species: [n] int64 (a model with one weight set, use_agnostic_product, uses it for every
  // atom). Returns B [n, out_dim].
  at::Tensor forward(const at::Tensor& a, const at::Tensor& species) const;
  // Returns dA [n, C K] (a's layout) for dB [n, out_dim].
  at::Tensor backward(const at::Tensor& a, const at::Tensor& species, const at::Tensor& grad_b) const;
  const std::string& executor() const { return name_; }  // "cpu generic avx512", "specialized sm_90", ...

 private:
  at::TensorOptions options_;
  int out_dim_ = 0;
  bool one_weight_set_ = false;  // ScDescriptor::shared_weights: every atom reads weight set 0
  at::Tensor weight_sets(const at::Tensor& species) const;  // each atom's weight set
  std::string name_;
  std::unique_ptr<ScCpuExecutor<float>> cpu32_;
  std::unique_ptr<ScCpuExecutor<double>> cpu64_;
  std::unique_ptr<ScCudaExecutor<float>> cuda32_;
  std::unique_ptr<ScCudaExecutor<double>> cuda64_;
};

}  // namespace flashmace
