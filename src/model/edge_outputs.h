#pragma once
// Forces and virials from the edge gradients g_e = dE/dv_e (mace_spec.md 10.2, 10.3), shared by
// every evaluation path. All tensors float64 on one device.
#include <ATen/ATen.h>

namespace flashmace {

// out[n] = sum_{e: index[e] = n} values[e], [n, ...]: a stable sort by index, then one reduction per
// row in edge order, so the result is bitwise reproducible on GPUs too (index_add uses atomics there).
at::Tensor index_sum(const at::Tensor& values, const at::Tensor& index, int64_t n);

// F_n = sum_{sender=n} g_e - sum_{receiver=n} g_e; [nodes, 3].
at::Tensor forces_from_edge_gradients(const at::Tensor& grad, const at::Tensor& sender, const at::Tensor& receiver,
                                      int64_t nodes);

// W = -sym(sum_e v_e (x) g_e); [3, 3].
at::Tensor virial_from_edge_gradients(const at::Tensor& vectors, const at::Tensor& grad);

// Half of each edge's -v (x) g in LAMMPS's Voigt order (xx yy zz xy xz yz); [E, 6].
at::Tensor half_edge_virials(const at::Tensor& vectors, const at::Tensor& grad);

// Per edge -v (x) g in LAMMPS's Voigt order (xx yy zz xy xz yz), half to each end; [nodes, 6].
at::Tensor atom_virial_from_edge_gradients(const at::Tensor& vectors, const at::Tensor& grad, const at::Tensor& sender,
                                           const at::Tensor& receiver, int64_t nodes);

}  // namespace flashmace
