#pragma once
// The per-edge pieces of a MACE layer that feed the tensor product, forward and explicit backward
// (vector-Jacobian products written out, no autograd): spherical harmonics of the edge direction
// (mace_spec.md 4), radial features with their distance derivative (3.3), the radial MLP (3.4),
// the density normalisation term (6.3) and the ZBL pair energy (8). All tensors [Ec, ...] of one
// chunk of edges, in the model's dtype and device.
#include <ATen/ATen.h>

#include <vector>

#include "model/mace_params.h"

namespace flashmace {

struct EdgeGeometry {
  at::Tensor vectors;         // [Ec, 3] set only by the fused CUDA kernels (edge_geometry_op.h), which
                              // leave r, u, y and def_dr undefined and recompute them in the backward
  at::Tensor r;               // [Ec, 1] lengths
  at::Tensor u;               // [Ec, 3] unit vectors
  std::vector<at::Tensor> y;  // y[l]: [Ec, 2l+1] spherical harmonics of block l
  at::Tensor sh;              // [Ec, (lmax+1)^2] the blocks side by side
  at::Tensor ef;              // [Ec, n_basis] radial features
  at::Tensor def_dr;          // [Ec, n_basis] their derivative with respect to r
  at::Tensor z_sender, z_receiver;  // [Ec] int64 atomic numbers, kept by the fused kernels of a model
                                    // with a distance transform (the backward needs the pair's radii)
};

// The polynomial envelope (mace_spec.md 3.3) and its r-derivative; r_max a scalar or per-edge tensor.
std::pair<at::Tensor, at::Tensor> polynomial_envelope(const at::Tensor& r, const at::Tensor& r_max, int p);

// The envelope of models that apply it inside their interactions (apply_cutoff false: it multiplies
// the radial MLP's outputs and the density term instead of the radial features), from the edges'
// vectors [Ec, 3]: f(|v|) [Ec, 1], and with it df/dv = f'(r) v / r [Ec, 3] for the backward pass.
struct InteractionEnvelope {
  at::Tensor r_max;  // scalar
  int p = 5;
  at::Tensor value(const at::Tensor& vectors) const;
  std::pair<at::Tensor, at::Tensor> value_and_gradient(const at::Tensor& vectors) const;
};

// ef without the envelope where the model applies it inside its interactions (apply_cutoff false).
EdgeGeometry edge_geometry(const MaceParams& model, const at::Tensor& vectors, const at::Tensor& z_sender,
                           const at::Tensor& z_receiver);

// dE/dv from dE/d(sh) (may be undefined) and dE/d(ef) (may be undefined).
at::Tensor edge_geometry_vjp(const MaceParams& model, const EdgeGeometry& geometry, const at::Tensor& grad_sh,
                             const at::Tensor& grad_ef);

// Radial MLP (e3nn FullyConnectedNet, silu-normalised hidden layers, no biases). The weights are
// folded once per model: layer k's 1/sqrt(fan_in) and, for k > 0, the silu normalisation constant of
// the activation before it are multiplied into W_k, so a layer is one GEMM and one plain silu.
std::vector<at::Tensor> fold_radial_mlp(const std::vector<at::Tensor>& layers);
// `pre` receives the hidden pre-activations the backward pass needs.
at::Tensor radial_mlp_forward(const std::vector<at::Tensor>& folded, const at::Tensor& ef, std::vector<at::Tensor>* pre);
// Only the hidden pre-activations (the last one's SiLU not taken: tf32_gemm.h takes it fused).
void radial_mlp_preactivations(const std::vector<at::Tensor>& folded, const at::Tensor& ef,
                               std::vector<at::Tensor>* pre);
// Without the output layer: the last hidden activation [Ec, H], and d(ef) from its gradient (callers
// take the output layer's transpose themselves).
at::Tensor radial_mlp_hidden(const std::vector<at::Tensor>& folded, const at::Tensor& ef, std::vector<at::Tensor>* pre);
at::Tensor radial_mlp_hidden_vjp(const std::vector<at::Tensor>& folded, const std::vector<at::Tensor>& pre,
                                 const at::Tensor& grad_hidden);
// a b for the backward pass of the radial MLP's output layer, dR W^T (K = paths x channels, e.g. 1,280;
// N = the MLP's width, 64): on the CPU in float32 or float64 with a's rows contiguous, flashmace's GEMM
// (kernels/cpu_gemm.h; b may be a transposed view), which runs this shape at ~85 % of the FMA peak
// where MKL's reached 30-55 % (bench/RESULTS.md); elsewhere at::mm. (The forward h W, K = 64, stays
// with MKL: as fast there.)
at::Tensor radial_mm(const at::Tensor& a, const at::Tensor& b);

// Density term tanh((ef W / sqrt(n))^2) [Ec, 1] of RealAgnosticDensity* blocks and its ef-gradient.
at::Tensor density_forward(const InteractionParams& layer, const at::Tensor& ef);
at::Tensor density_vjp(const InteractionParams& layer, const at::Tensor& ef, const at::Tensor& grad_density);

// ZBL: per-edge energy 0.5 V(r) [Ec] and its derivative with respect to r [Ec].
std::pair<at::Tensor, at::Tensor> zbl_energy_and_derivative(const at::Tensor& r, const at::Tensor& z_sender,
                                                            const at::Tensor& z_receiver, const ZBLParameters& zbl);

}  // namespace flashmace
