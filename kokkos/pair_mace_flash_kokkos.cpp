#include "pair_mace_flash_kokkos.h"

#include <cmath>
#include <type_traits>

#include "atom_kokkos.h"
#include "atom_masks.h"
#include "comm.h"
#include "core/host_transfers.h"
#include "engine/evaluator.h"
#include "error.h"
#include "force.h"
#include "halo_rows_kokkos.h"
#include "kokkos.h"
#include "memory_kokkos.h"
#include "neigh_list_kokkos.h"
#include "neigh_request.h"
#include "neighbor.h"
#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace LAMMPS_NS;
namespace fk = flashmace_kokkos;

template <class DeviceType>
PairMACEFlashKokkos<DeviceType>::PairMACEFlashKokkos(LAMMPS* lmp) : PairMACEFlash(lmp), device_rows_(lmp, this) {
  kokkosable = 1;
  atomKK = static_cast<AtomKokkos*>(atom);
  execution_space = ExecutionSpaceFromDevice<DeviceType>::space;
  // VerletKokkos syncs these to DeviceType before compute() and marks them modified after it.
  datamask_read = X_MASK | F_MASK | TYPE_MASK | TAG_MASK | ENERGY_MASK | VIRIAL_MASK;
  datamask_modify = F_MASK | ENERGY_MASK | VIRIAL_MASK;
  halo_.use_device_rows(&device_rows_);
}

template <class DeviceType>
PairMACEFlashKokkos<DeviceType>::~PairMACEFlashKokkos() {
  if (copymode) return;
  memoryKK->destroy_kokkos(k_eatom, eatom);
  memoryKK->destroy_kokkos(k_vatom, vatom);
}

template <class DeviceType>
void PairMACEFlashKokkos<DeviceType>::init_style() {
  PairMACEFlash::init_style();  // the plain style's checks and its full neighbour-list request
  // (hybrid/kk would hand the sub-style host or device lists and buffers of its own choosing)
  if (force->pair != this)
    error->all(FLERR, "Pair style mace/flash/kk cannot be a sub-style of pair_style hybrid yet: use mace/flash "
                      "(without /kk, with device cuda on a GPU) under pair_style hybrid/overlay");
  // The evaluator reads and writes DeviceType's memory directly: they must be the same kind.
  constexpr bool host_memory = Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename DeviceType::memory_space>::accessible;
  if (host_memory != (model_->device() == "cpu"))
    error->all(FLERR, std::string("Pair style mace/flash/kk runs on Kokkos ") + (host_memory ? "host" : "device") +
                          " memory but the model is on " + model_->device() + ": use pair_style keyword device " +
                          (host_memory ? "cpu" : "cuda"));
  NeighRequest* request = neighbor->requests[neighbor->nrequest - 1];
  request->kokkos_host = std::is_same<DeviceType, LMPHostType>::value && !std::is_same<DeviceType, LMPDeviceType>::value;
  request->kokkos_device = std::is_same<DeviceType, LMPDeviceType>::value;
  const std::vector<int64_t> species = type_species();
  d_type_species_ = Kokkos::View<int64_t*, DeviceType>("mace/flash/kk:type_species", species.size());
  auto host = Kokkos::create_mirror_view(d_type_species_);
  for (std::size_t t = 0; t < species.size(); ++t) host(t) = species[t];
  Kokkos::deep_copy(d_type_species_, host);
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<typename DeviceType::execution_space, Kokkos::Cuda>::value) {
    model_->set_stream(typename DeviceType::execution_space().cuda_stream());
    // Kokkos's CUDA initialisation prefers shared memory over L1 for every kernel of the context
    // (cudaDeviceSetCacheConfig(cudaFuncCachePreferShared)). The engine's cuBLAS GEMMs then take
    // ~20 % more cycles than in flashmace-bench (ncu, bench/RESULTS.md 2026-12-06 (third)). Back to the
    // default: each kernel's own shared memory decides the split, Kokkos's kernels included.
    if (const cudaError_t rc = cudaDeviceSetCacheConfig(cudaFuncCachePreferNone); rc != cudaSuccess)
      error->warning(FLERR, std::string("mace/flash/kk: could not reset the CUDA cache preference: ") +
                                cudaGetErrorString(rc));
  }
#endif
}

template <class DeviceType>
void PairMACEFlashKokkos<DeviceType>::grow_per_atom() {
  // ev_init(..., alloc = 0) sized maxeatom/maxvatom; the arrays are Kokkos views that alias
  // Pair::eatom / vatom on the host, which compute pe/atom and stress/atom read.
  if (eflag_atom) {
    memoryKK->destroy_kokkos(k_eatom, eatom);
    memoryKK->create_kokkos(k_eatom, eatom, maxeatom, "pair:eatom");
  }
  if (vflag_atom) {
    memoryKK->destroy_kokkos(k_vatom, vatom);
    memoryKK->create_kokkos(k_vatom, vatom, maxvatom, "pair:vatom");
  }
}

template <class DeviceType>
void PairMACEFlashKokkos<DeviceType>::compute(int eflag, int vflag) {
  ev_init(eflag, vflag, 0);
  const StepTransfers transfers(this);
  grow_per_atom();
  atomKK->sync(execution_space, datamask_read);
  const auto x = atomKK->k_x.view<DeviceType>();
  const auto f = atomKK->k_f.view<DeviceType>();
  const auto type = atomKK->k_type.view<DeviceType>();
  const auto tag = atomKK->k_tag.view<DeviceType>();
  const int nlocal = atom->nlocal, ntotal = atom->nlocal + atom->nghost;

  check_list_is_current();
  if (neighbor->ago == 0 || list_id_ == 0) {
    // One rank: every ghost folded into the owned atom it is an image of (the exchanger finds which).
    const std::vector<int>* owners = comm->nprocs == 1 ? halo_.local_owners() : nullptr;
    folded_ = owners != nullptr;
    const int nghost = folded_ ? static_cast<int>(owners->size()) : 0;
    if (static_cast<int>(d_owner_.extent(0)) != nghost) d_owner_ = Kokkos::View<int*, DeviceType>("mace/flash/kk:owner", nghost);
    if (nghost > 0) {
      const Kokkos::View<const int*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(owners->data(), nghost);
      Kokkos::deep_copy(d_owner_, host);
      if (fk::kCrossesBus<DeviceType>) flashmace::count_to_device(static_cast<int64_t>(sizeof(int)) * nghost);
    }
    fk::build_skin_list<DeviceType>(static_cast<NeighListKokkos<DeviceType>*>(list), nlocal, folded_ ? nlocal : ntotal,
                                    x, type, d_type_species_, d_owner_, domain->h, edges_);
    ++list_id_;
  }
  const int rows = edges_.rows;

  if (static_cast<int>(d_forces_.extent(0)) < rows) {
    d_forces_ = decltype(d_forces_)("mace/flash/kk:forces", atom->nmax);
    d_atom_virial_ = decltype(d_atom_virial_)();
    d_node_energy_ = decltype(d_node_energy_)("mace/flash/kk:node_energy", atom->nmax);
  }
  if (vflag_atom && static_cast<int>(d_atom_virial_.extent(0)) < rows)
    d_atom_virial_ = decltype(d_atom_virial_)("mace/flash/kk:atom_virial", atom->nmax);
  if (!d_scalars_.data()) d_scalars_ = decltype(d_scalars_)("mace/flash/kk:energy_virial", 10);

  flashmace::GraphView graph;
  graph.nlocal = nlocal;
  graph.ntotal = rows;
  graph.nedges = edges_.nedges;
  graph.species = edges_.species.data();
  graph.sender = edges_.sender.data();
  graph.receiver = edges_.receiver.data();
  graph.image = edges_.image.data();
  graph.positions = x.data();  // (LayoutRight: rows of 3; folded, the owned atoms' only)
  graph.cell = cell();
  graph.list_id = list_id_;
  graph.min_distance = kMinDistance;
  flashmace::Request request;
  request.forces = request.virial = request.atom_energy = true;
  request.atom_virial = vflag_atom != 0;
  flashmace::Outputs outputs;
  outputs.energy = d_scalars_.data();
  outputs.node_energy = d_node_energy_.data();
  outputs.forces = d_forces_.data();
  outputs.virial = d_scalars_.data() + 1;
  outputs.atom_virial = vflag_atom ? d_atom_virial_.data() : nullptr;
  // The evaluator queues on Kokkos's stream (init_style): it reads what the kernels above wrote
  // and the kernels below read its outputs in stream order, without a fence.
  flashmace::HaloExchanger* halo = exchange_ && !folded_ ? &halo_ : nullptr;
  evaluate_or_stop([&] {
    try {
      model_->evaluate(graph, halo, request, outputs);
    } catch (const flashmace::TooCloseError& e) {
      const auto h_tag = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tag);
      stop_overlap(h_tag(e.sender), h_tag(e.receiver), e.distance);
    } catch (const flashmace::NonFinitePositionError& e) {
      const auto h_tag = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tag);
      stop_non_finite_position(h_tag(e.node));
    }
  });

  using exec = Kokkos::RangePolicy<typename DeviceType::execution_space>;
  // Ghost rows too (several ranks): LAMMPS's reverse communication (newton on) adds them to their owners.
  const auto forces = d_forces_;
  Kokkos::parallel_for("mace/flash/kk:add_forces", exec(0, rows), KOKKOS_LAMBDA(const int i) {
    for (int d = 0; d < 3; ++d) f(i, d) += forces(i, d);
  });
  if (eflag_atom) {
    const auto eatom_view = k_eatom.view<DeviceType>();
    const auto node_energy = d_node_energy_;
    Kokkos::parallel_for("mace/flash/kk:add_eatom", exec(0, nlocal),
                         KOKKOS_LAMBDA(const int i) { eatom_view(i) += node_energy(i); });
    k_eatom.template modify<DeviceType>();
    k_eatom.template sync<LMPHostType>();
    if (fk::kCrossesBus<DeviceType>)
      flashmace::count_to_host(static_cast<int64_t>(sizeof(double) * k_eatom.extent(0)));
  }
  if (vflag_atom) {
    const auto vatom_view = k_vatom.view<DeviceType>();
    const auto atom_virial = d_atom_virial_;
    Kokkos::parallel_for("mace/flash/kk:add_vatom", exec(0, rows), KOKKOS_LAMBDA(const int i) {
      for (int k = 0; k < 6; ++k) vatom_view(i, k) += atom_virial(i, k);
    });
    k_vatom.template modify<DeviceType>();
    k_vatom.template sync<LMPHostType>();
    if (fk::kCrossesBus<DeviceType>)
      flashmace::count_to_host(static_cast<int64_t>(sizeof(double) * 6 * k_vatom.extent(0)));
  }
  // One copy to the host: the energy and the 3x3 virial.
  const auto h_scalars = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d_scalars_);
  if (fk::kCrossesBus<DeviceType>)
    flashmace::count_to_host(static_cast<int64_t>(sizeof(double) * d_scalars_.extent(0)));
  stop_if_not_finite(h_scalars(0), h_scalars.data() + 1, 9, "virial");
  if (eflag_global) eng_vdwl += h_scalars(0);
  if (vflag_global) {
    // Both are sum_edges r_ij (x) f_ij (mace_spec.md 10.3); LAMMPS stores xx yy zz xy xz yz.
    const int voigt[6] = {0, 4, 8, 1, 2, 5};
    for (int k = 0; k < 6; ++k) virial[k] += h_scalars(1 + voigt[k]);
  }
  atomKK->modified(execution_space, F_MASK);
}

template <class DeviceType>
int PairMACEFlashKokkos<DeviceType>::pack_forward_comm(int n, int* list_, double* buf, int, int*) {
  const Kokkos::View<const int*, LMPHostType, Kokkos::MemoryTraits<Kokkos::Unmanaged>> list_view(list_, n);
  return fk::pack_rows<LMPHostType>(n, list_view, fk::wrap_rows<LMPHostType>(halo_.rows(), atom->nlocal + atom->nghost, halo_.ncols()),
                                    fk::Buffer<LMPHostType>(buf, n * halo_.ncols()));
}

template <class DeviceType>
void PairMACEFlashKokkos<DeviceType>::unpack_forward_comm(int n, int first, double* buf) {
  fk::unpack_rows<LMPHostType>(n, first, fk::wrap_rows<LMPHostType>(halo_.rows(), atom->nlocal + atom->nghost, halo_.ncols()),
                               fk::Buffer<LMPHostType>(buf, n * halo_.ncols()));
  halo_.count_forward_values(static_cast<long long>(n) * halo_.ncols());
}

template <class DeviceType>
int PairMACEFlashKokkos<DeviceType>::pack_reverse_comm(int n, int first, double* buf) {
  halo_.count_reverse_values(static_cast<long long>(n) * halo_.ncols());
  return fk::pack_range<LMPHostType>(n, first, fk::wrap_rows<LMPHostType>(halo_.rows(), atom->nlocal + atom->nghost, halo_.ncols()),
                                     fk::Buffer<LMPHostType>(buf, n * halo_.ncols()));
}

template <class DeviceType>
void PairMACEFlashKokkos<DeviceType>::unpack_reverse_comm(int n, int* list_, double* buf) {
  const Kokkos::View<const int*, LMPHostType, Kokkos::MemoryTraits<Kokkos::Unmanaged>> list_view(list_, n);
  fk::unpack_add_rows<LMPHostType>(n, list_view, fk::wrap_rows<LMPHostType>(halo_.rows(), atom->nlocal + atom->nghost, halo_.ncols()),
                                   fk::Buffer<LMPHostType>(buf, n * halo_.ncols()));
}

template <class DeviceType>
int PairMACEFlashKokkos<DeviceType>::pack_forward_comm_kokkos(int n, DAT::tdual_int_2d k_sendlist, int iswap,
                                                              DAT::tdual_xfloat_1d& buf, int, int*) {
  const auto list_view = Kokkos::subview(k_sendlist.view<DeviceType>(), iswap, Kokkos::ALL());
  const auto buf_view = buf.view<DeviceType>();
  return fk::pack_rows<DeviceType>(n, list_view, fk::wrap_rows<DeviceType>(halo_.rows(), atom->nlocal + atom->nghost, halo_.ncols()),
                                   fk::Buffer<DeviceType>(buf_view.data(), buf_view.extent(0)));
}

template <class DeviceType>
void PairMACEFlashKokkos<DeviceType>::unpack_forward_comm_kokkos(int n, int first, DAT::tdual_xfloat_1d& buf) {
  const auto buf_view = buf.view<DeviceType>();
  fk::unpack_rows<DeviceType>(n, first, fk::wrap_rows<DeviceType>(halo_.rows(), atom->nlocal + atom->nghost, halo_.ncols()),
                              fk::Buffer<DeviceType>(buf_view.data(), buf_view.extent(0)));
  halo_.count_forward_values(static_cast<long long>(n) * halo_.ncols());
}

namespace LAMMPS_NS {
template class PairMACEFlashKokkos<LMPDeviceType>;
#ifdef LMP_KOKKOS_GPU
template class PairMACEFlashKokkos<LMPHostType>;
#endif
}  // namespace LAMMPS_NS
