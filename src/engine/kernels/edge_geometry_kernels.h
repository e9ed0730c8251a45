#pragma once
// Fused per-edge geometry of edge_terms.h (mace_spec.md 3.3 and 4), one pass over the edges per
// direction, on the CPU or one CUDA kernel, for models without a distance transform or with the
// Agnesi one (MACE-MP-0b and later: the pair's covalent radii from the edge's atomic numbers):
//   forward:  v [E, 3] -> Y [E, (lmax+1)^2] spherical harmonics, ef [E, nb] radial features
//             (Bessel basis of the transformed distance times the polynomial envelope);
//   backward: dE/dv [E, 3] from dE/dY and dE/def (either may be null), recomputing r, u, Y and the
//             radial slopes from v instead of storing them.
// Torch-free: plain pointers (the CUDA versions: device memory, a cudaStream_t handle).
#include <cstdint>

namespace flashmace {

constexpr int kGeometryMaxLmax = 4;
constexpr int kGeometryMaxBasis = 32;

// Y_l[b] += c Y_{l-1}[a] u[j] for l >= 2, entries in increasing l; a and b index the whole
// harmonics row.
struct GeometryShTerm {
  int32_t a, j, b;
};

template <typename T>
struct GeometryTables {
  const GeometryShTerm* terms = nullptr;  // in the memory of the device that runs the loop
  const T* coeff = nullptr;               // one per term
  const T* bessel = nullptr;              // [n_basis] frequencies
  // Whether frequency k is (k + 1) times the first (to float64 round-off), as MACE makes them: the
  // CPU loops then take sin and cos of every frequency from those of the first (geometry_bessel).
  bool bessel_multiples = false;
  int num_terms = 0, lmax = 0, dim_sh = 0, n_basis = 0;
  int p = 5;                              // envelope exponent
  // Whether ef carries the envelope (apply_cutoff true); false: the Bessel basis alone, the envelope
  // applied by the interactions (NonLinear blocks of MACE-MH-1).
  bool envelope_features = true;
  double r_max = 0, prefactor = 0;        // prefactor = sqrt(2 / r_max)
  // Agnesi transform (null radii: none): covalent radii by atomic number, and its q, p, a.
  const T* covalent_radii = nullptr;
  double agnesi_q = 0, agnesi_p = 0, agnesi_a = 0;
};

// Per-edge atomic numbers (sender, receiver) [E] each, read only with a distance transform.
struct GeometryElements {
  const int64_t* sender = nullptr;
  const int64_t* receiver = nullptr;
};

// ZBL pair repulsion (mace_spec.md 8): per edge 0.5 V(r) times the polynomial envelope of the pair's
// covalent-radius sum, and its r-derivative; radii by atomic number, on the device of the loop.
template <typename T>
struct ZblTables {
  const T* covalent_radii = nullptr;
  double c[4] = {0, 0, 0, 0};
  double a_exp = 0, a_prefactor = 0;
  int p = 5;
};

template <typename T>
void edge_zbl_cpu(const ZblTables<T>& t, const T* v, GeometryElements z, int64_t E, T* energy, T* slope);
template <typename T>
void edge_zbl_cuda(const ZblTables<T>& t, const T* v, GeometryElements z, int64_t E, T* energy, T* slope,
                   void* stream);

template <typename T>
void edge_geometry_forward_cpu(const GeometryTables<T>& t, const T* v, GeometryElements z, int64_t E, T* Y, T* ef);
template <typename T>
void edge_geometry_backward_cpu(const GeometryTables<T>& t, const T* v, GeometryElements z, int64_t E, const T* dY,
                                const T* def, T* dv);

template <typename T>
void edge_geometry_forward_cuda(const GeometryTables<T>& t, const T* v, GeometryElements z, int64_t E, T* Y, T* ef,
                                void* stream);
template <typename T>
void edge_geometry_backward_cuda(const GeometryTables<T>& t, const T* v, GeometryElements z, int64_t E, const T* dY,
                                 const T* def, T* dv, void* stream);

}  // namespace flashmace
