#include "engine/step/atom_sums.h"

#include "engine/kernels/atom_sums_kernels.h"
#include "model/edge_outputs.h"

#if FLASHMACE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmace {

namespace {

#if FLASHMACE_CUDA_KERNELS
// Forces and virial in one kernel launch (the per-atom virial stays on the segment sums).
void forces_and_virial_cuda(const EdgeTopology& topo, const at::Tensor& grad, const at::Tensor& v64,
                            const AtomSumsRequest& want, AtomSums* out) {
  const at::Tensor g = grad.contiguous(), v = v64.contiguous();
  const auto f64 = v.options();
  if (want.forces) out->forces = at::empty({topo.padded_atoms, 3}, f64);
  const at::Tensor parts = want.virial ? at::empty({topo.padded_atoms, 9}, f64) : at::Tensor();
  const c10::cuda::CUDAGuard guard(g.device());
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "atom_sums", [&] {
    AtomSumsArgs<scalar_t> a;
    a.grad = g.data_ptr<scalar_t>();
    a.vectors = v.data_ptr<double>();
    a.receiver_ptr = topo.receiver_ptr.data_ptr<int64_t>();
    if (want.forces) {
      a.sender_ptr = topo.sender_ptr.data_ptr<int64_t>();
      a.sender_order = topo.sender_order.data_ptr<int64_t>();
    }
    a.atoms = topo.padded_atoms;
    atom_sums_cuda(a, want.forces ? out->forces.data_ptr<double>() : nullptr,
                   want.virial ? parts.data_ptr<double>() : nullptr,
                   c10::cuda::getCurrentCUDAStream(g.device().index()).stream());
  });
  if (want.virial) out->virial = parts.sum(0).view({3, 3});
}
#endif

}  // namespace

AtomSums atom_sums(const EdgeTopology& topo, const at::Tensor& grad, const at::Tensor& v64, const AtomSumsRequest& want) {
  AtomSums out;
  bool done = false;
#if FLASHMACE_CUDA_KERNELS
  // (the receiver CSR exists when the topology was built with atom_sums)
  if (grad.is_cuda() && topo.receiver_ptr.defined() && (want.forces || want.virial)) {
    forces_and_virial_cuda(topo, grad, v64, want, &out);
    done = true;
  }
#endif
  if (done && !want.atom_virial) return out;
  // Per-atom sums over the cached counts: one reduction per atom in edge order (deterministic, no
  // host synchronisation).
  const at::Tensor g64 = grad.to(at::kDouble);
  auto none = [&](const at::Tensor& x) { return at::zeros({topo.padded_atoms, x.size(1)}, x.options()); };
  auto by_receiver = [&](const at::Tensor& x) {
    if (x.size(0) == 0) return none(x);
    return at::segment_reduce(x, "sum", topo.receiver_counts, {}, {}, 0, /*unsafe=*/true, at::Scalar(0));
  };
  auto by_sender = [&](const at::Tensor& x) {
    if (x.size(0) == 0) return none(x);
    return at::segment_reduce(x.index_select(0, topo.sender_order), "sum", topo.sender_counts, {}, {}, 0,
                              /*unsafe=*/true, at::Scalar(0));
  };
  if (!done) {
    if (want.forces) out.forces = by_sender(g64) - by_receiver(g64);
    if (want.virial) {
      const at::Tensor vg = at::mm(v64.t(), g64);
      out.virial = -0.5 * (vg + vg.t());
    }
  }
  if (want.atom_virial) {
    const at::Tensor half = half_edge_virials(v64, g64);
    out.atom_virial = by_sender(half) + by_receiver(half);
  }
  return out;
}

}  // namespace flashmace
