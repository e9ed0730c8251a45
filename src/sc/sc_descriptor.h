#pragma once
// The symmetric contraction of one MACE layer as a sparse polynomial (mace_spec.md 7.2), built once
// from the model file's coupling tensors U_nu and per-element weights; torch-free and CUDA-free.
//
//   B[n, c, o, m] = sum_P W_o[z_n, P, c] * sum_{terms (m, j, P) of block o} coeff * mono_j(A[n, c, :])
//   mono_j(a)     = a[k_1] * a[k_2] * ... * a[k_nu]          (k_1 <= k_2 <= ... <= k_nu)
// A[n, c, k]: component k = (input block b, m) of channel c, the concatenated (l, m) of the target
// irreps. The executors read it where the layer holds it: row n of the node features in e3nn's
// mul_ir layout, [C x (2l+1)] per block side by side (sc_input_columns), and write dA there too.
//
// U_nu is not symmetric in its nu input indices, but A is the same vector in every slot, so the U
// entries of all permutations of an index tuple multiply the same monomial and are merged into one
// coefficient (their sum). Exact zeros are dropped. P runs over the paths of all orders of a block:
// P = path_offset[nu - 1] + p with p the path of U_nu (weights_max for nu_max, weights.j for
// nu = nu_max - 1 - j), so the weights of one block are one [Z, P_total, C] table. By default
// linearly dependent paths are removed and their weights folded into the remaining ones
// (ScDescriptorOptions::reduce_paths); then P counts the kept paths and W holds mixed weights.
//
// Monomials are shared by all blocks of the layer and closed under prefixes: monomial j is
// parent(j) * a[last(j)], where parent(j) (-1 for degree 1) is the monomial of the first nu - 1
// indices. They are ordered by degree, then lexicographically, so every parent precedes its children
// and one multiply per monomial evaluates them all; reverse order back-propagates through them.
#include <cstdint>
#include <string>
#include <vector>

namespace flashmace {

class ModelFile;

struct ScTerm {
  int32_t m = 0;     // output component, 0..2l
  int32_t mono = 0;  // index into ScDescriptor::monomials
  int32_t path = 0;  // P: row of the block's weight table
  double coeff = 0;  // sum of U_nu[(m,) perm(k), p] over the distinct permutations of the tuple
};

struct ScBlock {
  int l = 0;                         // output irrep l; the block has 2l+1 components
  int out_offset = 0;                // first column of the block in B's row (C * (2l'+1) per earlier block)
  std::vector<int> num_paths;        // paths of order nu = 1..nu_max (after reduction)
  std::vector<int> source_paths;     // P_nu as stored in U_nu
  std::vector<int> path_offset;      // first P of order nu
  int total_paths = 0;               // sum of P_nu
  std::vector<double> weights;       // [Z, total_paths, C]
  std::vector<ScTerm> terms;         // sorted by (m, mono, path)
  std::vector<int> nonzeros_per_nu;  // |terms| of each order (for reports)
  int dim() const { return 2 * l + 1; }
};

struct ScMonomial {
  std::vector<int32_t> k;  // sorted input components
  int32_t parent = -1;     // monomial of k[0..nu-2], -1 for degree 1
  int32_t last = 0;        // k[nu-1]
};

struct ScDescriptor {
  int layer = 0;
  int num_components = 0;  // K: components of one channel of A (concatenated (l, m) of the target irreps)
  std::vector<int> input_dims;  // 2l+1 of each block of the target irreps (C channels each), in order
  int channels = 0;        // C
  int num_elements = 0;    // Z (1 with shared_weights)
  bool shared_weights = false;  // one weight set for every element (use_agnostic_product): read as element 0
  int correlation = 0;     // nu_max
  int out_dim = 0;         // columns of B: sum over blocks of C * (2l+1)
  // A's row holds each block component-major instead (ir_mul: component m of channel c at
  // C * (the block's first component + m) + c); B stays mul_ir. Set before building executors.
  bool input_ir_mul = false;
  std::vector<ScMonomial> monomials;
  std::vector<ScBlock> blocks;

  std::size_t num_terms() const;
};

struct ScDescriptorOptions {
  // Keep only a basis of linearly independent paths per order, with the weights mixed to match
  // (sc_path_reduction.h). For MP-0 medium it removes ~4/5 of the terms. Exact to the precision
  // of the stored U: round-off for float64 files; for float32 files the result moves by ~1e-7
  // relative, as much as rounding U to float32 moved it.
  bool reduce_paths = true;
};

// Where A's component k of channel c sits in an atom's row of C K values: column base[k] + stride[k] * c,
// in mul_ir base[k] = C * (first component of k's block) + m, stride[k] = 2l+1; in ir_mul
// (ScDescriptor::input_ir_mul) base[k] = C * (first component of k's block + m), stride[k] = 1.
struct ScInputColumns {
  std::vector<int32_t> base, stride;  // [K]
};
ScInputColumns sc_input_columns(const ScDescriptor& d);

// Builds the descriptor of product layer t (0-based) of a loaded model. Throws flashmace::Error
// naming the tensor when a U tensor or weight table does not have the shape the model implies.
ScDescriptor build_sc_descriptor(const ModelFile& file, int layer, const ScDescriptorOptions& options = {});

// One line per block: monomials, nonzero terms per order, dense U entries; for logs and benchmarks.
std::string describe(const ScDescriptor& d);

}  // namespace flashmace
