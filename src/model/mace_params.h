#pragma once
// A MACE model's tensors, moved to one dtype and device and grouped by block, plus the layouts
// (irreps, tensor-product paths) the forward pass needs. Built once from a ModelFile.
#include <ATen/ATen.h>

#include <vector>

#include "core/irreps.h"
#include "core/model_file.h"
#include "model/radial.h"
#include "model/spherical_harmonics.h"
#include "model/symmetric_contraction.h"

namespace flashmace {

// A torch.nn.Sequential of Linear (with bias) -> LayerNorm -> SiLU, ..., Linear (mace-torch's
// RadialMLP, used by NonLinear blocks).
struct NormedMLP {
  std::vector<at::Tensor> weight, bias;            // Linear k: [out, in], [out]
  std::vector<at::Tensor> norm_weight, norm_bias;  // LayerNorm after Linear k (all but the last)
};

struct InteractionParams {
  Irreps in, out, target;  // node features in, hidden irreps out of the product, message irreps
  Irreps edge;             // the conv TP's input irreps (linear_up's output)
  ConvTPLayout tp;
  std::vector<at::Tensor> tp_w3j;  // one per tp path
  bool residual = false;
  bool density = false;
  // Whether the message sums are normalised by per-receiver sums of an edge density term: Density
  // blocks (1 + sum) and NonLinear blocks (beta sum + alpha).
  bool density_sums() const { return density || nonlinear; }
  // The width of the projected message sums: the gate's input in NonLinear blocks, else the target.
  int64_t projected_dim() const { return (nonlinear ? gate : target).dim(); }
  double avg_num_neighbors = 1.0;
  at::Tensor linear_up, linear, skip_tp, density_weight;
  std::vector<at::Tensor> radial_layers;
  std::vector<ContractionWeights> contractions;  // one per block of `out`
  at::Tensor product_linear;
  std::vector<at::Tensor> readout;  // [w] (linear) or [w1, w2] (non-linear, last layer)
  // NonLinear blocks (docs/model-format.md): skip_tp is then a plain linear, `linear` is linear_1.
  bool nonlinear = false;
  Irreps gate;                                      // the gate's input irreps
  at::Tensor source_embedding, target_embedding;    // [Z, C], e3nn's 1/sqrt(Z) included
  NormedMLP radial_net, density_net;
  at::Tensor linear_res, linear_2, alpha, beta;
};

struct MaceParams {
  MaceConfig config;
  at::TensorOptions options;  // float dtype and device of every float tensor
  Irreps sh;
  SphericalHarmonics spherical_harmonics;
  at::Tensor atomic_numbers;   // [Z] int64
  at::Tensor node_embedding;   // [Z, C]
  at::Tensor atomic_energies;  // [Z]
  at::Tensor atomic_energies_f64;  // [Z] float64: E0 is always added in float64
  at::Tensor bessel_weights;
  at::Tensor r_max;  // scalar
  int cutoff_p = 5;
  at::Tensor transform_q, transform_p, transform_a, transform_alpha, transform_covalent_radii;
  bool zbl = false;
  ZBLParameters zbl_params;
  std::vector<InteractionParams> layers;

  static MaceParams load(const ModelFile& file, at::ScalarType dtype, at::Device device);
};

// A view of a model-file tensor as an ATen tensor (copied, converted to `options`).
at::Tensor tensor_from_file(const ModelFile& file, const std::string& key, const at::TensorOptions& options);

}  // namespace flashmace
