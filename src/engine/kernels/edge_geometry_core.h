#pragma once
// The per-edge arithmetic of the fused geometry kernels (edge_geometry_kernels.h), shared by the CPU
// loop and the CUDA kernels: the same formulas as edge_terms.cpp's ATen code, every intermediate in
// registers or thread-local arrays.
#include <cmath>

#include "engine/kernels/edge_geometry_kernels.h"

#if defined(__CUDACC__)
#define FLASHMACE_GEOMETRY_HD __host__ __device__ __forceinline__
#else
#define FLASHMACE_GEOMETRY_HD inline
#endif

namespace flashmace {

constexpr int kGeometryMaxSh = (kGeometryMaxLmax + 1) * (kGeometryMaxLmax + 1);

// Length, unit vector (length clamped at 1e-12 as in edge_terms.cpp) and harmonics of one edge.
template <typename T>
FLASHMACE_GEOMETRY_HD T geometry_harmonics(const GeometryTables<T>& t, const T* v, T u[3], T* y) {
  using std::sqrt;
  const T r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  const T rc = r > T(1e-12) ? r : T(1e-12);
  for (int j = 0; j < 3; ++j) u[j] = v[j] / rc;
  y[0] = 1;
  if (t.lmax >= 1)
    for (int j = 0; j < 3; ++j) y[1 + j] = T(1.7320508075688772) * u[j];
  for (int k = 4; k < t.dim_sh; ++k) y[k] = 0;
  for (int i = 0; i < t.num_terms; ++i) {
    const GeometryShTerm s = t.terms[i];
    y[s.b] += t.coeff[i] * y[s.a] * u[s.j];
  }
  return r;
}

// Polynomial envelope and its r-derivative (zero beyond r_max).
template <typename T>
FLASHMACE_GEOMETRY_HD void geometry_envelope(const GeometryTables<T>& t, T r, T* value, T* slope) {
  const T rm = static_cast<T>(t.r_max), p = static_cast<T>(t.p);
  const T c1 = (p + 1) * (p + 2) / 2, c2 = p * (p + 2), c3 = p * (p + 1) / 2;
  const T x = r / rm;
  T xp1 = 1;
  for (int k = 0; k < t.p - 1; ++k) xp1 *= x;
  const T xp = xp1 * x;
  const bool inside = r < rm;
  *value = inside ? T(1) - c1 * xp + c2 * xp * x - c3 * xp * x * x : T(0);
  *slope = inside ? (-c1 * p * xp1 + c2 * (p + 1) * xp - c3 * (p + 2) * xp * x) / rm : T(0);
}

// The distance the Bessel basis sees and its r-derivative: r itself, or its Agnesi transform
// 1 / (1 + a x^q / (1 + x^(q-p))), x = r / (half the pair's covalent-radius sum) (mace_spec.md 3.3).
template <typename T>
FLASHMACE_GEOMETRY_HD T geometry_basis_distance(const GeometryTables<T>& t, T r, int64_t zs, int64_t zr, T* slope) {
  using std::pow;
  if (!t.covalent_radii) {
    *slope = 1;
    return r;
  }
  const T q = static_cast<T>(t.agnesi_q), p = static_cast<T>(t.agnesi_p), a = static_cast<T>(t.agnesi_a);
  const T half_sum = T(0.5) * (t.covalent_radii[zs] + t.covalent_radii[zr]);
  const T x = r / half_sum;
  const T xq = pow(x, q), xqp = pow(x, q - p);
  const T den = T(1) + xqp;
  const T f = a * xq / den;
  const T df = a * (q * pow(x, q - T(1)) * den - xq * (q - p) * pow(x, q - p - T(1))) / (den * den);
  const T g = T(1) / (T(1) + f);
  *slope = -g * g * df / half_sum;
  return g;
}

// ZBL energy 0.5 V(r) f(r) of one edge and its r-derivative (edge_terms.cpp's formulas).
template <typename T>
FLASHMACE_GEOMETRY_HD void geometry_zbl_edge(const ZblTables<T>& t, const T* v, int64_t zs, int64_t zr, T* energy,
                                             T* slope) {
  using std::exp;
  using std::pow;
  using std::sqrt;
  const T r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  const T ts = static_cast<T>(zs), tr = static_cast<T>(zr);
  const T ax = static_cast<T>(t.a_exp);
  const T a = static_cast<T>(t.a_prefactor) * T(0.529) / (pow(ts, ax) + pow(tr, ax));
  const T x = r / a;
  const T d[4] = {T(3.2), T(0.9423), T(0.4028), T(0.2016)};
  T phi = 0, dphi = 0;
  for (int i = 0; i < 4; ++i) {
    const T term = static_cast<T>(t.c[i]) * exp(-d[i] * x);
    phi += term;
    dphi -= d[i] * term;
  }
  const T k = T(14.3996) * ts * tr;
  const T pot = k / r * phi;
  const T dpot = k * (-phi / (r * r) + dphi / (a * r));
  // The envelope of r against the covalent-radius sum, exponent p.
  const T rm = t.covalent_radii[zs] + t.covalent_radii[zr], pd = static_cast<T>(t.p);
  const T c1 = (pd + 1) * (pd + 2) / 2, c2 = pd * (pd + 2), c3 = pd * (pd + 1) / 2;
  const T u = r / rm;
  T up1 = 1;
  for (int i = 0; i < t.p - 1; ++i) up1 *= u;
  const T up = up1 * u;
  const bool inside = r < rm;
  const T env = inside ? T(1) - c1 * up + c2 * up * u - c3 * up * u * u : T(0);
  const T denv = inside ? (-c1 * pd * up1 + c2 * (pd + 1) * up - c3 * (pd + 2) * up * u) / rm : T(0);
  *energy = T(0.5) * pot * env;
  *slope = T(0.5) * (dpot * env + pot * denv);
}

// sin(w_k rb) for the n_basis frequencies w_k, and cos(w_k rb) where c is given. On the host, when the
// frequencies are multiples of the first (t.bessel_multiples), from sin and cos of w_1 rb by the
// Chebyshev recurrence sin((k+1)a) = 2 cos(a) sin(ka) - sin((k-1)a) (and the same for cos): one sin
// and one cos per edge instead of one per frequency; its error is a few ulps for the <= 32 terms.
template <typename T>
FLASHMACE_GEOMETRY_HD void geometry_bessel(const GeometryTables<T>& t, T rb, T* s, T* c) {
  using std::cos;
  using std::sin;
#if !defined(__CUDA_ARCH__)
  if (t.bessel_multiples) {
    const T a = t.bessel[0] * rb, s1 = sin(a), c1 = cos(a), twice = 2 * c1;
    T sp = 0, sk = s1, cp = 1, ck = c1;
    for (int k = 0; k < t.n_basis; ++k) {
      s[k] = sk;
      if (c) c[k] = ck;
      const T sn = twice * sk - sp, cn = twice * ck - cp;
      sp = sk;
      sk = sn;
      cp = ck;
      ck = cn;
    }
    return;
  }
#endif
  for (int k = 0; k < t.n_basis; ++k) {
    s[k] = sin(t.bessel[k] * rb);
    if (c) c[k] = cos(t.bessel[k] * rb);
  }
}

// Y [dim_sh] and ef [n_basis] of the edge with vector v and atomic numbers zs, zr.
template <typename T>
FLASHMACE_GEOMETRY_HD void geometry_forward_edge(const GeometryTables<T>& t, const T* v, int64_t zs, int64_t zr, T* Y,
                                                 T* ef) {
  using std::sin;
  T u[3], y[kGeometryMaxSh];
  const T r = geometry_harmonics(t, v, u, y);
  for (int k = 0; k < t.dim_sh; ++k) Y[k] = y[k];
  T env = 1, denv = 0, slope;
  if (t.envelope_features) geometry_envelope(t, r, &env, &denv);
  const T rb = geometry_basis_distance(t, r, zs, zr, &slope);
  const T pre = static_cast<T>(t.prefactor);
  T sines[kGeometryMaxBasis];
  geometry_bessel(t, rb, sines, static_cast<T*>(nullptr));
  for (int k = 0; k < t.n_basis; ++k) ef[k] = pre * sines[k] / rb * env;
}

// dv [3] = dE/dv from dY [dim_sh] and def [n_basis] (either may be null).
template <typename T>
FLASHMACE_GEOMETRY_HD void geometry_backward_edge(const GeometryTables<T>& t, const T* v, int64_t zs, int64_t zr,
                                                  const T* dY, const T* def, T* dv) {
  using std::cos;
  using std::sin;
  T u[3], y[kGeometryMaxSh];
  const T r = geometry_harmonics(t, v, u, y);
  T gu[3] = {0, 0, 0};
  if (dY) {
    T gy[kGeometryMaxSh];
    for (int k = 0; k < t.dim_sh; ++k) gy[k] = dY[k];
    // Y_l = C_l(Y_{l-1}, u) from the top down: the terms in reverse.
    for (int i = t.num_terms - 1; i >= 0; --i) {
      const GeometryShTerm s = t.terms[i];
      const T c = t.coeff[i] * gy[s.b];
      gy[s.a] += c * u[s.j];
      gu[s.j] += c * y[s.a];
    }
    if (t.lmax >= 1)
      for (int j = 0; j < 3; ++j) gu[j] += T(1.7320508075688772) * gy[1 + j];
  }
  const T rc = r > T(1e-12) ? r : T(1e-12);
  const T ug = u[0] * gu[0] + u[1] * gu[1] + u[2] * gu[2];
  T gr = 0;  // dE/dr through the radial features
  if (def) {
    T env = 1, denv = 0, slope;
    if (t.envelope_features) geometry_envelope(t, r, &env, &denv);
    const T rb = geometry_basis_distance(t, r, zs, zr, &slope);
    const T pre = static_cast<T>(t.prefactor);
    T sines[kGeometryMaxBasis], cosines[kGeometryMaxBasis];
    geometry_bessel(t, rb, sines, cosines);
    for (int k = 0; k < t.n_basis; ++k) {
      const T wx = t.bessel[k] * rb, s = sines[k];
      const T basis = pre * s / rb, dbasis = pre * (wx * cosines[k] - s) / (rb * rb);
      gr += def[k] * (dbasis * slope * env + basis * denv);
    }
  }
  for (int j = 0; j < 3; ++j) dv[j] = (gu[j] - u[j] * ug) / rc + gr * u[j];
}

}  // namespace flashmace
