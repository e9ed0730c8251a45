#include "engine/ops/edge_geometry_op.h"

#include <cmath>
#include <string>
#include <vector>

#include "engine/kernels/edge_geometry_kernels.h"

#if FLASHMACE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmace {

EdgeGeometryOp::EdgeGeometryOp(const MaceParams& model) : m_(model) {
  const int lmax = m_.spherical_harmonics.lmax();
  const int64_t nb = m_.bessel_weights.size(0);
#if !FLASHMACE_CUDA_KERNELS
  if (m_.options.device().is_cuda()) return;
#endif
  if (m_.zbl) {
    const ZBLParameters& z = m_.zbl_params;
    zbl_radii_ = z.covalent_radii.to(m_.options.device(), m_.options.dtype().toScalarType()).contiguous();
    const at::Tensor c = z.c.to(at::kCPU, at::kDouble).contiguous();
    for (int i = 0; i < 4; ++i) zbl_c_[i] = c.data_ptr<double>()[i];
    zbl_a_exp_ = z.a_exp.item<double>();
    zbl_a_prefactor_ = z.a_prefactor.item<double>();
  }
  const std::string& transform = m_.config.distance_transform;
  if ((!transform.empty() && transform != "Agnesi") || lmax > kGeometryMaxLmax || nb > kGeometryMaxBasis) return;
  std::vector<int32_t> terms;
  std::vector<double> coeff;
  for (int l = 2; l <= lmax; ++l) {
    const at::Tensor c = m_.spherical_harmonics.coupling(l).to(at::kCPU, at::kDouble).contiguous();
    const double* cp = c.data_ptr<double>();
    for (int i = 0; i < 2 * l - 1; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 2 * l + 1; ++k) {
          const double value = cp[(i * 3 + j) * (2 * l + 1) + k];
          if (value == 0) continue;
          terms.insert(terms.end(), {(l - 1) * (l - 1) + i, j, l * l + k});
          coeff.push_back(value);
        }
  }
  const at::ScalarType dtype = m_.options.dtype().toScalarType();
  num_terms_ = static_cast<int>(coeff.size());
  // (a one-entry placeholder keeps the tables non-empty for lmax < 2)
  terms_ = at::tensor(terms.empty() ? std::vector<int32_t>{0, 0, 0} : terms, at::kInt).to(m_.options.device());
  coeff_ = at::tensor(coeff.empty() ? std::vector<double>{0} : coeff, at::kDouble).to(m_.options.device(), dtype);
  bessel_ = m_.bessel_weights.to(m_.options.device(), dtype).contiguous();
  const at::Tensor w = m_.bessel_weights.to(at::kCPU, at::kDouble);
  const at::Tensor multiples = w[0] * at::arange(1, w.size(0) + 1, w.options());
  // (to the evaluation dtype's round-off: a float32 file's frequencies are multiples to float32's)
  bessel_multiples_ = w.size(0) > 0 && at::allclose(w, multiples, dtype == at::kFloat ? 2.4e-7 : 1e-14, 0.0);
  if (transform == "Agnesi") {
    radii_ = m_.transform_covalent_radii.to(m_.options.device(), dtype).contiguous();
    agnesi_q_ = m_.transform_q.item<double>();
    agnesi_p_ = m_.transform_p.item<double>();
    agnesi_a_ = m_.transform_a.item<double>();
  }
}

namespace {

// The edges' atomic numbers as the kernels read them (only a distance transform needs them).
GeometryElements elements_of(const EdgeGeometry& g) {
  GeometryElements z;
  if (g.z_sender.defined()) {
    z.sender = g.z_sender.data_ptr<int64_t>();
    z.receiver = g.z_receiver.data_ptr<int64_t>();
  }
  return z;
}

}  // namespace

template <typename T>
auto EdgeGeometryOp::tables() const {
  GeometryTables<T> t;
  t.terms = reinterpret_cast<const GeometryShTerm*>(terms_.data_ptr<int32_t>());
  t.coeff = coeff_.data_ptr<T>();
  t.bessel = bessel_.data_ptr<T>();
  t.bessel_multiples = bessel_multiples_;
  const int lmax = m_.spherical_harmonics.lmax();
  t.num_terms = num_terms_;
  t.lmax = lmax;
  t.dim_sh = (lmax + 1) * (lmax + 1);
  t.n_basis = static_cast<int>(bessel_.size(0));
  t.p = m_.cutoff_p;
  t.envelope_features = m_.config.apply_cutoff;
  t.r_max = m_.config.r_max;
  t.prefactor = std::sqrt(2.0 / m_.config.r_max);
  if (radii_.defined()) {
    t.covalent_radii = radii_.data_ptr<T>();
    t.agnesi_q = agnesi_q_;
    t.agnesi_p = agnesi_p_;
    t.agnesi_a = agnesi_a_;
  }
  return t;
}

EdgeGeometry EdgeGeometryOp::forward(const at::Tensor& v, const at::Tensor& zs, const at::Tensor& zr) const {
  if (!fused()) return edge_geometry(m_, v, zs, zr);
  EdgeGeometry g;
  g.vectors = v.contiguous();
  const int64_t E = v.size(0);
  const int lmax = m_.spherical_harmonics.lmax();
  g.sh = at::empty({E, (lmax + 1) * (lmax + 1)}, v.options());
  g.ef = at::empty({E, bessel_.size(0)}, v.options());
  if (radii_.defined()) {
    g.z_sender = zs.to(at::kLong).contiguous();
    g.z_receiver = zr.to(at::kLong).contiguous();
  }
  const GeometryElements z = elements_of(g);
  AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "edge_geometry_forward", [&] {
    const scalar_t* vp = g.vectors.data_ptr<scalar_t>();
    if (v.is_cpu()) {
      edge_geometry_forward_cpu(tables<scalar_t>(), vp, z, E, g.sh.data_ptr<scalar_t>(), g.ef.data_ptr<scalar_t>());
    } else {
#if FLASHMACE_CUDA_KERNELS
      const c10::cuda::CUDAGuard guard(v.device());
      edge_geometry_forward_cuda(tables<scalar_t>(), vp, z, E, g.sh.data_ptr<scalar_t>(), g.ef.data_ptr<scalar_t>(),
                                 c10::cuda::getCurrentCUDAStream(v.device().index()).stream());
#endif
    }
  });
  return g;
}

at::Tensor EdgeGeometryOp::vjp(const EdgeGeometry& g, const at::Tensor& grad_sh, const at::Tensor& grad_ef) const {
  if (!fused()) return edge_geometry_vjp(m_, g, grad_sh, grad_ef);
  at::Tensor dv = at::empty_like(g.vectors);
  const at::Tensor gs = grad_sh.defined() ? grad_sh.contiguous() : at::Tensor();
  const at::Tensor ge = grad_ef.defined() ? grad_ef.contiguous() : at::Tensor();
  const GeometryElements z = elements_of(g);
  AT_DISPATCH_FLOATING_TYPES(dv.scalar_type(), "edge_geometry_backward", [&] {
    const scalar_t* vp = g.vectors.data_ptr<scalar_t>();
    const scalar_t* gsp = gs.defined() ? gs.data_ptr<scalar_t>() : nullptr;
    const scalar_t* gep = ge.defined() ? ge.data_ptr<scalar_t>() : nullptr;
    if (dv.is_cpu()) {
      edge_geometry_backward_cpu(tables<scalar_t>(), vp, z, dv.size(0), gsp, gep, dv.data_ptr<scalar_t>());
    } else {
#if FLASHMACE_CUDA_KERNELS
      const c10::cuda::CUDAGuard guard(dv.device());
      edge_geometry_backward_cuda(tables<scalar_t>(), vp, z, dv.size(0), gsp, gep, dv.data_ptr<scalar_t>(),
                                  c10::cuda::getCurrentCUDAStream(dv.device().index()).stream());
#endif
    }
  });
  return dv;
}

std::pair<at::Tensor, at::Tensor> EdgeGeometryOp::zbl(const at::Tensor& v, const at::Tensor& zs,
                                                      const at::Tensor& zr) const {
  if (!zbl_radii_.defined())
    return zbl_energy_and_derivative(at::linalg_vector_norm(v, 2, {1}, true), zs, zr, m_.zbl_params);
  const at::Tensor vc = v.contiguous(), zsl = zs.to(at::kLong).contiguous(), zrl = zr.to(at::kLong).contiguous();
  const int64_t E = v.size(0);
  at::Tensor energy = at::empty({E}, v.options()), slope = at::empty({E}, v.options());
  const GeometryElements z{zsl.data_ptr<int64_t>(), zrl.data_ptr<int64_t>()};
  AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "edge_zbl", [&] {
    ZblTables<scalar_t> t;
    t.covalent_radii = zbl_radii_.data_ptr<scalar_t>();
    for (int i = 0; i < 4; ++i) t.c[i] = zbl_c_[i];
    t.a_exp = zbl_a_exp_;
    t.a_prefactor = zbl_a_prefactor_;
    t.p = m_.zbl_params.p;
    if (v.is_cpu()) {
      edge_zbl_cpu(t, vc.data_ptr<scalar_t>(), z, E, energy.data_ptr<scalar_t>(), slope.data_ptr<scalar_t>());
    } else {
#if FLASHMACE_CUDA_KERNELS
      const c10::cuda::CUDAGuard guard(v.device());
      edge_zbl_cuda(t, vc.data_ptr<scalar_t>(), z, E, energy.data_ptr<scalar_t>(), slope.data_ptr<scalar_t>(),
                    c10::cuda::getCurrentCUDAStream(v.device().index()).stream());
#endif
    }
  });
  return {energy, slope};
}

}  // namespace flashmace
