#pragma once
// Generic CPU executor of an ScDescriptor (any model, any layer): B = SC(A, species) and dA from dB.
// Torch-free: raw row-major arrays, the caller owns them.
//
// Layouts (T = float or double):
//   A       [n, C K]         node features of the layer in mul_ir (e3nn's layout: per block of the
//                            target irreps C x (2l+1), channel-major), K components per channel
//                            (mace_spec.md 7.1; where each sits: sc_input_columns)
//   species [n]              element index in [0, Z)
//   B, dB   [n, out_dim]     per block o: C * (2l_o+1) columns, channel-major (column c*(2l+1) + m),
//                            blocks one after the other: the reference's at::cat(parts, 1)
//   dA      [n, C K]         overwritten, A's layout
// Atoms are independent: the loops (sc_cpu_kernels.h, built per instruction set and picked by
// core/cpu_isa.h) run one thread per atom; a caller may also split work by offsetting the pointers
// of a range of atoms (A + i*C*K, species + i, B + i*out_dim). The methods are const and keep no
// state.
#include <cstdint>
#include <vector>

#include "sc/sc_cpu_kernels.h"
#include "sc/sc_descriptor.h"

namespace flashmace {

template <typename T>
class ScCpuExecutor {
 public:
  explicit ScCpuExecutor(const ScDescriptor& d);

  void forward(const T* A, const int64_t* species, int64_t n, T* B) const;
  void backward(const T* A, const int64_t* species, const T* dB, int64_t n, T* dA) const;

  int out_dim() const { return out_dim_; }
  int channels() const { return C_; }
  int num_components() const { return K_; }

 private:
  struct Block {
    std::vector<T> weights;          // [Z, total_paths, C]
    std::vector<int32_t> term_mono;
    std::vector<int32_t> term_slot;  // m * total_paths + path
    std::vector<T> term_coeff;
  };
  void check_species(const int64_t* species, int64_t n) const;

  int K_ = 0, C_ = 0, Z_ = 0, out_dim_ = 0;
  std::vector<int32_t> parent_, last_;
  ScInputColumns input_;  // where each component sits in an atom's row of A
  std::vector<Block> blocks_;
  std::vector<ScCpuBlock<T>> block_tables_;  // views of blocks_
  ScCpuTables<T> tables_;                    // views of the above
};

extern template class ScCpuExecutor<float>;
extern template class ScCpuExecutor<double>;

}  // namespace flashmace
