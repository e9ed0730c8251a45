#pragma once
// The fast engine's last step on CUDA, in one launch: per-atom forces and per-atom parts of the
// virial from the receiver-sorted edge gradients g = dE/dv (mace_spec.md 10.2-10.3), in float64:
//   F[i] = sum over edges with sender i of g[e] - sum over edges with receiver i of g[e],
//   W[i] = -1/2 sum over edges with receiver i of (v g^T + g v^T)  (every edge has one receiver).
// A warp per atom, its lanes striding over the atom's edges, then a fixed shuffle tree: the sums do
// not depend on timing (bitwise-reproducible). Torch-free: device pointers and a cudaStream_t.
#include <cstdint>

namespace flashmace {

template <typename T>
struct AtomSumsArgs {
  const T* grad = nullptr;              // [E, 3] receiver-sorted
  const double* vectors = nullptr;      // [E, 3] the same order
  const int64_t* receiver_ptr = nullptr;  // [atoms + 1] CSR of the receivers
  const int64_t* sender_ptr = nullptr;    // [atoms + 1] CSR of sender_order
  const int64_t* sender_order = nullptr;  // [E] edges grouped by sender
  int64_t atoms = 0;
};

// forces [atoms, 3] and virial_parts [atoms, 9] (row-major 3 x 3), each skipped when null.
template <typename T>
void atom_sums_cuda(const AtomSumsArgs<T>& a, double* forces, double* virial_parts, void* stream);

}  // namespace flashmace
