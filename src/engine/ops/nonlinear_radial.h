#pragma once
// The two radial MLPs of a NonLinear block (docs/model-format.md, "NonLinear blocks"; MACE-MH-1):
// per edge, from its radial features and its sender's and receiver's elements, the tensor-product
// weights R [Ec, weight_numel] and the density term d = tanh(MLP_d^2) [Ec, 1], both times the
// envelope f(r) where the model applies it inside the interactions (apply_cutoff false). Forward
// and explicit backward (no autograd). The elements enter the first Linear only, through the
// embeddings, so that Linear is one GEMM on the radial features plus two rows gathered from
// per-element tables made once per model. Internal to the fast engine (ATen).
#include <ATen/ATen.h>

#include <optional>
#include <utility>
#include <vector>

#include "engine/ops/edge_terms.h"
#include "model/mace_params.h"

namespace flashmace {

// What one MLP's forward leaves for its backward: per hidden layer its LayerNorm input and
// statistics (the normalised values are recomputed).
struct NormedMlpState {
  std::vector<at::Tensor> pre, mean, rstd;
};

// The radial MLP's output is not kept: its backward needs only the last hidden activation, and R
// takes the envelope in place, so a chunk holds one [Ec, weight_numel] tensor.
struct NonlinearRadialState {
  NormedMlpState radial, density;
  at::Tensor density_out;  // [Ec, 1], before tanh(o^2)
  std::vector<at::Tensor> tensors() const;  // every tensor held (to share across CUDA streams)
};

class NonlinearRadial {
 public:
  NonlinearRadial(const MaceParams& model, const InteractionParams& layer);

  // ef [Ec, n_basis]; sender, receiver [Ec] element indices; vectors [Ec, 3] (read for the envelope).
  // Returns R [Ec, weight_numel] and d [Ec, 1].
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& ef, const at::Tensor& sender, const at::Tensor& receiver,
                                            const at::Tensor& vectors, NonlinearRadialState* state) const;

  // From dE/dR [Ec, weight_numel] and dE/dd [Ec, 1] (either may be undefined): dE/d(ef) [Ec, n_basis]
  // and dE/dv [Ec, 3] through the envelope (undefined where the features carry it).
  std::pair<at::Tensor, at::Tensor> backward(const NonlinearRadialState& state, const at::Tensor& vectors,
                                             const at::Tensor& grad_radial, const at::Tensor& grad_density) const;

 private:
  struct Mlp {
    at::Tensor ef_weight;                 // [n_basis, H0]: the first Linear's radial-feature columns, transposed
    at::Tensor sender, receiver;          // [Z, H0]: the embeddings through the first Linear (receiver: + bias)
    std::vector<at::Tensor> weight, bias;  // Linear k >= 1: [out, in], [out]
    std::vector<at::Tensor> norm_weight, norm_bias;  // LayerNorm k
  };
  Mlp radial_, density_;
  std::optional<InteractionEnvelope> envelope_;  // apply_cutoff false

  static Mlp fold(const NormedMLP& mlp, const at::Tensor& source, const at::Tensor& target, int64_t n_basis);
  static at::Tensor forward_mlp(const Mlp& mlp, const at::Tensor& ef, const at::Tensor& sender,
                                const at::Tensor& receiver, NormedMlpState* state);
  // dE/d(ef) from dE/d(last hidden activation); last_normed: the last LayerNorm's output if the
  // caller made it already (else recomputed).
  static at::Tensor backward_mlp(const Mlp& mlp, const NormedMlpState& state, at::Tensor grad_hidden,
                                 const at::Tensor& last_normed = {});
  // LayerNorm k's output, from its kept input and statistics.
  static at::Tensor normalized(const Mlp& mlp, const NormedMlpState& state, std::size_t k);
};

}  // namespace flashmace
