#pragma once
// The per-edge geometry of a model (edge_terms.h: harmonics, radial features, and their backward)
// behind one object: the fused per-edge loops (edge_geometry_kernels.h, CPU or CUDA) for models
// without a distance transform or with the Agnesi one, the ATen code of edge_terms.h otherwise
// (the Soft transform, lmax > 4, more than 32 Bessel functions). Built once per model.
#include <ATen/ATen.h>

#include <utility>

#include "engine/ops/edge_terms.h"
#include "model/mace_params.h"

namespace flashmace {

class EdgeGeometryOp {
 public:
  explicit EdgeGeometryOp(const MaceParams& model);

  // Fused: geometry.sh, .ef and .vectors are set (the backward recomputes the rest from the vectors).
  EdgeGeometry forward(const at::Tensor& vectors, const at::Tensor& z_sender, const at::Tensor& z_receiver) const;
  // dE/dv [Ec, 3] from dE/d(sh) and dE/d(ef) (either may be undefined).
  at::Tensor vjp(const EdgeGeometry& geometry, const at::Tensor& grad_sh, const at::Tensor& grad_ef) const;
  bool fused() const { return terms_.defined(); }
  // ZBL (models with pair repulsion): per edge 0.5 V(r) f(r) [Ec] and its r-derivative [Ec], in one
  // fused pass where the kernels exist (else edge_terms.h's ATen code).
  std::pair<at::Tensor, at::Tensor> zbl(const at::Tensor& vectors, const at::Tensor& z_sender,
                                        const at::Tensor& z_receiver) const;

 private:
  MaceParams m_;                       // shallow copy: tensors shared with the engine
  at::Tensor terms_, coeff_, bessel_;  // the fused kernels' tables on the device (undefined: ATen code)
  bool bessel_multiples_ = false;      // GeometryTables::bessel_multiples
  at::Tensor radii_;                   // covalent radii by atomic number (Agnesi transform; else undefined)
  double agnesi_q_ = 0, agnesi_p_ = 0, agnesi_a_ = 0;
  at::Tensor zbl_radii_;  // covalent radii by atomic number for the fused ZBL (undefined: ATen code)
  double zbl_c_[4] = {0, 0, 0, 0}, zbl_a_exp_ = 0, zbl_a_prefactor_ = 0;
  int num_terms_ = 0;
  template <typename T>
  auto tables() const;
};

}  // namespace flashmace
