// Generic CPU executor of the SC polynomial (sc_descriptor.h, mace_spec.md 7.2): the descriptor's
// tables, flattened for the loops of sc_cpu_kernels.h, and the choice of their instruction set.
#include "sc/sc_cpu_executor.h"

#include <algorithm>

#include "core/cpu_isa.h"
#include "core/cpu_threads.h"
#include "core/error.h"

namespace flashmace {

namespace {

// The loops of the instruction set the CPU kernels use now (cpu_isa() names only those built in).
template <typename T>
void run_forward(const ScCpuTables<T>& t, const T* A, const int64_t* species, int64_t n, T* B, T* scratch) {
  switch (cpu_isa()) {
#if FLASHMACE_CPU_X86_VARIANTS
    case CpuIsa::avx512:
      return sc_cpu_avx512::sc_cpu_forward(t, A, species, n, B, scratch);
    case CpuIsa::avx2:
      return sc_cpu_avx2::sc_cpu_forward(t, A, species, n, B, scratch);
#endif
    default:
      return sc_cpu_portable::sc_cpu_forward(t, A, species, n, B, scratch);
  }
}

template <typename T>
void run_backward(const ScCpuTables<T>& t, const T* A, const int64_t* species, const T* dB, int64_t n, T* dA,
                  T* scratch) {
  switch (cpu_isa()) {
#if FLASHMACE_CPU_X86_VARIANTS
    case CpuIsa::avx512:
      return sc_cpu_avx512::sc_cpu_backward(t, A, species, dB, n, dA, scratch);
    case CpuIsa::avx2:
      return sc_cpu_avx2::sc_cpu_backward(t, A, species, dB, n, dA, scratch);
#endif
    default:
      return sc_cpu_portable::sc_cpu_backward(t, A, species, dB, n, dA, scratch);
  }
}

}  // namespace

template <typename T>
ScCpuExecutor<T>::ScCpuExecutor(const ScDescriptor& d)
    : K_(d.num_components), C_(d.channels), Z_(d.num_elements), out_dim_(d.out_dim), input_(sc_input_columns(d)) {
  for (const auto& m : d.monomials) {
    parent_.push_back(m.parent);
    last_.push_back(m.last);
  }
  int max_slots = 0;
  for (const auto& b : d.blocks) {
    Block e;
    e.weights.assign(b.weights.begin(), b.weights.end());
    for (const auto& t : b.terms) {
      e.term_mono.push_back(t.mono);
      e.term_slot.push_back(t.m * b.total_paths + t.path);
      e.term_coeff.push_back(static_cast<T>(t.coeff));
    }
    max_slots = std::max(max_slots, b.dim() * b.total_paths);
    blocks_.push_back(std::move(e));
    ScCpuBlock<T> v;
    v.dim = b.dim();
    v.out_offset = b.out_offset;
    v.total_paths = b.total_paths;
    block_tables_.push_back(v);
  }
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    ScCpuBlock<T>& v = block_tables_[i];
    v.num_terms = static_cast<int>(blocks_[i].term_mono.size());
    v.weights = blocks_[i].weights.data();
    v.term_mono = blocks_[i].term_mono.data();
    v.term_slot = blocks_[i].term_slot.data();
    v.term_coeff = blocks_[i].term_coeff.data();
  }
  tables_.K = K_;
  tables_.C = C_;
  tables_.out_dim = out_dim_;
  tables_.num_monomials = static_cast<int>(parent_.size());
  tables_.parent = parent_.data();
  tables_.last = last_.data();
  tables_.in_base = input_.base.data();
  tables_.in_stride = input_.stride.data();
  tables_.num_blocks = static_cast<int>(block_tables_.size());
  tables_.blocks = block_tables_.data();
  tables_.tile = sc_cpu_tile<T>(C_);
  // a, da, mono, grad and the block's slots, one tile each
  tables_.scratch_per_thread = static_cast<int64_t>(2 * K_ + 2 * tables_.num_monomials + max_slots) * tables_.tile;
}

template <typename T>
void ScCpuExecutor<T>::check_species(const int64_t* species, int64_t n) const {
  for (int64_t i = 0; i < n; ++i)
    if (species[i] < 0 || species[i] >= Z_)
      throw Error("Symmetric contraction: atom " + std::to_string(i) + " has element index " +
                  std::to_string(species[i]) + ", but the model has " + std::to_string(Z_) + " elements");
}

template <typename T>
void ScCpuExecutor<T>::forward(const T* A, const int64_t* species, int64_t n, T* B) const {
  check_species(species, n);
  std::vector<T> scratch(static_cast<std::size_t>(cpu_threads() * tables_.scratch_per_thread));
  run_forward(tables_, A, species, n, B, scratch.data());
}

template <typename T>
void ScCpuExecutor<T>::backward(const T* A, const int64_t* species, const T* dB, int64_t n, T* dA) const {
  check_species(species, n);
  std::vector<T> scratch(static_cast<std::size_t>(cpu_threads() * tables_.scratch_per_thread));
  run_backward(tables_, A, species, dB, n, dA, scratch.data());
}

template class ScCpuExecutor<float>;
template class ScCpuExecutor<double>;

}  // namespace flashmace
