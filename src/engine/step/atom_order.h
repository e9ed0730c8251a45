#pragma once
// The order the fast engine keeps the atoms of a step that runs in several node blocks: the owned
// atoms along a Z-order (Morton) curve through cubic bins, so that a block of consecutive rows is a
// compact region of space, not the slab of a caller's lattice or bin order (LAMMPS sorts its atoms
// bin by bin along one axis). A compact block keeps most reverse-edge pairs inside its own chunks
// (one radial-MLP row per pair, ops/radial_pairs.h), where a slab thinner than the cutoff loses
// most of them. Internal (ATen).
#include <ATen/ATen.h>

#include <cstdint>

namespace flashmace {

// positions [ntotal, 3] float64: each engine row's node, [ntotal] int64 on the positions' device.
// The owned nodes [0, nlocal) in Z-order over bins of `bin` Angstrom (ties in the caller's order),
// the ghosts after them in their own order. Non-finite positions count as the origin (the order
// is only a layout: any permutation gives the same results).
at::Tensor space_filling_order(const at::Tensor& positions, int64_t nlocal, double bin);

}  // namespace flashmace
