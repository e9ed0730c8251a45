#pragma once
// pair_style mace/flash/kk (docs/pair_style.md): the Kokkos twin of mace/flash. Positions, types and
// the full neighbour list are read from LAMMPS's Kokkos views; at each list build the evaluator's
// list (skin included, ghosts folded on one rank) is built there (edge_list_kokkos.h), and every
// step hands over the positions view itself (GraphView::list_id), forces, energies and virials
// go back into Kokkos views, and the per-layer ghost exchange packs its rows with Kokkos kernels
// (halo_rows_kokkos.h). Keywords, type-to-element mapping, model loading and error messages are the
// plain style's (PairMACEFlash, the common base).
//
// On a GPU the evaluator queues on Kokkos's CUDA stream (Evaluator::set_stream), so the Kokkos
// kernels before and after it are ordered with its work without fences; one copy per step brings
// the energy and virial to the host (docs/kokkos.md). The exchange's rows stay in DeviceType's
// memory (device_rows_kokkos.h).
#include "device_rows_kokkos.h"
#include "edge_list_kokkos.h"
#include "kokkos_base.h"
#include "kokkos_type.h"
#include "pair_mace_flash.h"

namespace LAMMPS_NS {

template <class DeviceType>
class PairMACEFlashKokkos : public PairMACEFlash, public KokkosBase {
 public:
  typedef DeviceType device_type;
  typedef ArrayTypes<DeviceType> AT;

  explicit PairMACEFlashKokkos(class LAMMPS*);
  ~PairMACEFlashKokkos() override;

  void compute(int, int) override;
  void init_style() override;

  // The ghost exchange on the host (CommBrick's path: LAMMPS 2022 sends every reverse exchange,
  // and forward ones of host-space styles, this way), with the same kernels as the device path.
  int pack_forward_comm(int, int*, double*, int, int*) override;
  void unpack_forward_comm(int, int, double*) override;
  int pack_reverse_comm(int, int, double*) override;
  void unpack_reverse_comm(int, int*, double*) override;
  // KokkosBase: CommKokkos's device path of the forward exchange.
  int pack_forward_comm_kokkos(int, DAT::tdual_int_2d, int, DAT::tdual_xfloat_1d&, int, int*) override;
  void unpack_forward_comm_kokkos(int, int, DAT::tdual_xfloat_1d&) override;

 private:
  void grow_per_atom();

  flashmace_kokkos::KokkosDeviceRows<DeviceType> device_rows_;
  Kokkos::View<int64_t*, DeviceType> d_type_species_;
  flashmace_kokkos::EdgeList<DeviceType> edges_;  // the engine's list, built at list builds
  Kokkos::View<int*, DeviceType> d_owner_;          // one rank: each ghost's owned atom
  // The evaluator's outputs, on DeviceType's memory.
  Kokkos::View<double*, DeviceType> d_scalars_;  // [10] energy, then the 3x3 virial: one copy to the host
  Kokkos::View<double*, DeviceType> d_node_energy_;
  Kokkos::View<double* [3], Kokkos::LayoutRight, DeviceType> d_forces_;
  Kokkos::View<double* [6], Kokkos::LayoutRight, DeviceType> d_atom_virial_;

  DAT::tdual_efloat_1d k_eatom;
  DAT::tdual_virial_array k_vatom;
};

}  // namespace LAMMPS_NS
