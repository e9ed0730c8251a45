// Generic CPU executor of the SC polynomial (sc_descriptor.h, mace_spec.md 7.2).
// Forward, per atom and tile of kTile channels (channels innermost, so every loop below is a
// fixed-length loop over the tile that the compiler vectorises):
//   a[k][c]    = A[n, c, k]                                    transpose of the tile
//   mono[j][c] = mono[parent(j)][c] * a[last(j)][c]            one multiply per monomial
//   acc[m,P]   = sum_{terms (m, j, P)} coeff * mono[j]         per block
//   B[n, c, m] = sum_P W[z_n, P, c] * acc[m, P][c]
// Backward is the reverse: g[m,P] = dB[m] * W[P], G[j] = sum_terms coeff * g[m,P], then the
// monomials in reverse order push G[j] into a[last(j)] and into their parent.
// Atoms are independent: one thread per atom (OpenMP when built with it), scratch per thread.
#include "sc/sc_cpu_executor.h"

#include <algorithm>

#include "core/error.h"

namespace flashmace {

namespace {
// Channels per tile: monomial values of a tile (up to 968 for K = 16, nu = 3) stay in L2.
constexpr int kTile = 16;
}  // namespace

template <typename T>
ScCpuExecutor<T>::ScCpuExecutor(const ScDescriptor& d)
    : K_(d.num_components), C_(d.channels), Z_(d.num_elements), out_dim_(d.out_dim) {
  for (const auto& m : d.monomials) {
    parent_.push_back(m.parent);
    last_.push_back(m.last);
  }
  for (const auto& b : d.blocks) {
    Block e;
    e.dim = b.dim();
    e.out_offset = b.out_offset;
    e.total_paths = b.total_paths;
    e.weights.assign(b.weights.begin(), b.weights.end());
    for (const auto& t : b.terms) {
      e.term_mono.push_back(t.mono);
      e.term_slot.push_back(t.m * b.total_paths + t.path);
      e.term_coeff.push_back(static_cast<T>(t.coeff));
    }
    max_slots_ = std::max(max_slots_, e.dim * e.total_paths);
    blocks_.push_back(std::move(e));
  }
}

template <typename T>
void ScCpuExecutor<T>::check_species(const int64_t* species, int64_t n) const {
  for (int64_t i = 0; i < n; ++i)
    if (species[i] < 0 || species[i] >= Z_)
      throw Error("Symmetric contraction: atom " + std::to_string(i) + " has element index " +
                  std::to_string(species[i]) + ", but the model has " + std::to_string(Z_) + " elements");
}

template <typename T>
void ScCpuExecutor<T>::load_tile(const T* A, int nc, T* a, T* mono) const {
  std::fill_n(a, static_cast<std::size_t>(K_) * kTile, T(0));
  for (int c = 0; c < nc; ++c)
    for (int k = 0; k < K_; ++k) a[k * kTile + c] = A[c * K_ + k];
  for (std::size_t j = 0; j < parent_.size(); ++j) {
    T* mj = &mono[j * kTile];
    const T* ak = &a[last_[j] * kTile];
    if (parent_[j] < 0) {
      for (int c = 0; c < kTile; ++c) mj[c] = ak[c];
    } else {
      const T* mp = &mono[parent_[j] * kTile];
      for (int c = 0; c < kTile; ++c) mj[c] = mp[c] * ak[c];
    }
  }
}

template <typename T>
void ScCpuExecutor<T>::forward(const T* A, const int64_t* species, int64_t n, T* B) const {
  check_species(species, n);
  const std::size_t J = parent_.size();
#if defined(_OPENMP)
#pragma omp parallel
#endif
  {
    std::vector<T> a(static_cast<std::size_t>(K_) * kTile), mono(J * kTile),
        acc(static_cast<std::size_t>(max_slots_) * kTile);
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (int64_t i = 0; i < n; ++i) {
      const T* Ai = A + i * C_ * K_;
      T* Bi = B + i * out_dim_;
      for (int c0 = 0; c0 < C_; c0 += kTile) {
        const int nc = std::min(kTile, C_ - c0);
        load_tile(Ai + c0 * K_, nc, a.data(), mono.data());
        for (const Block& b : blocks_) {
          const std::size_t slots = static_cast<std::size_t>(b.dim) * b.total_paths;
          std::fill_n(acc.begin(), slots * kTile, T(0));
          for (std::size_t t = 0; t < b.term_mono.size(); ++t) {
            const T coeff = b.term_coeff[t];
            const T* mj = &mono[b.term_mono[t] * kTile];
            T* s = &acc[b.term_slot[t] * kTile];
            for (int c = 0; c < kTile; ++c) s[c] += coeff * mj[c];
          }
          const T* W = &b.weights[static_cast<std::size_t>(species[i]) * b.total_paths * C_ + c0];
          for (int m = 0; m < b.dim; ++m) {
            T out[kTile] = {};
            for (int p = 0; p < b.total_paths; ++p) {
              const T* s = &acc[(m * b.total_paths + p) * kTile];
              const T* w = W + p * C_;
              for (int c = 0; c < nc; ++c) out[c] += w[c] * s[c];
            }
            for (int c = 0; c < nc; ++c) Bi[b.out_offset + (c0 + c) * b.dim + m] = out[c];
          }
        }
      }
    }
  }
}

template <typename T>
void ScCpuExecutor<T>::backward(const T* A, const int64_t* species, const T* dB, int64_t n, T* dA) const {
  check_species(species, n);
  const std::size_t J = parent_.size();
#if defined(_OPENMP)
#pragma omp parallel
#endif
  {
    std::vector<T> a(static_cast<std::size_t>(K_) * kTile), da(a.size()), mono(J * kTile), grad(J * kTile),
        g(static_cast<std::size_t>(max_slots_) * kTile);
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (int64_t i = 0; i < n; ++i) {
      const T* Ai = A + i * C_ * K_;
      const T* dBi = dB + i * out_dim_;
      T* dAi = dA + i * C_ * K_;
      for (int c0 = 0; c0 < C_; c0 += kTile) {
        const int nc = std::min(kTile, C_ - c0);
        load_tile(Ai + c0 * K_, nc, a.data(), mono.data());
        std::fill(grad.begin(), grad.end(), T(0));
        for (const Block& b : blocks_) {
          const T* W = &b.weights[static_cast<std::size_t>(species[i]) * b.total_paths * C_ + c0];
          for (int m = 0; m < b.dim; ++m) {
            T dbm[kTile] = {};
            for (int c = 0; c < nc; ++c) dbm[c] = dBi[b.out_offset + (c0 + c) * b.dim + m];
            for (int p = 0; p < b.total_paths; ++p) {
              T* s = &g[(m * b.total_paths + p) * kTile];
              const T* w = W + p * C_;
              for (int c = 0; c < nc; ++c) s[c] = w[c] * dbm[c];
              for (int c = nc; c < kTile; ++c) s[c] = T(0);
            }
          }
          for (std::size_t t = 0; t < b.term_mono.size(); ++t) {
            const T coeff = b.term_coeff[t];
            const T* s = &g[b.term_slot[t] * kTile];
            T* gj = &grad[b.term_mono[t] * kTile];
            for (int c = 0; c < kTile; ++c) gj[c] += coeff * s[c];
          }
        }
        std::fill(da.begin(), da.end(), T(0));
        for (std::size_t j = J; j-- > 0;) {
          const T* gj = &grad[j * kTile];
          T* dak = &da[last_[j] * kTile];
          if (parent_[j] < 0) {
            for (int c = 0; c < kTile; ++c) dak[c] += gj[c];
          } else {
            const T* mp = &mono[parent_[j] * kTile];
            const T* ak = &a[last_[j] * kTile];
            T* gp = &grad[parent_[j] * kTile];
            for (int c = 0; c < kTile; ++c) {
              dak[c] += gj[c] * mp[c];
              gp[c] += gj[c] * ak[c];
            }
          }
        }
        for (int c = 0; c < nc; ++c)
          for (int k = 0; k < K_; ++k) dAi[(c0 + c) * K_ + k] = da[k * kTile + c];
      }
    }
  }
}

template class ScCpuExecutor<float>;
template class ScCpuExecutor<double>;

}  // namespace flashmace
