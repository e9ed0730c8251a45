#pragma once
// The halo exchange's rows in DeviceType's memory (flashmace_lammps::DeviceRows): the evaluator
// hands the Kokkos style its node-feature and gradient rows where the model lives, forward
// exchanges on a device are packed there by the style's kernels (halo_rows_kokkos.h), and what
// LAMMPS communicates on the host is staged with these copies. On a host memory space (Kokkos
// Serial/OpenMP) the same code runs with host-to-host copies.
#include <cstddef>
#include <string>
#include <type_traits>

#include "comm_kokkos.h"
#include "core/host_transfers.h"
#include "kokkos_type.h"
#include "lammps.h"
#include "lammps_halo_exchanger.h"
#include "pair.h"

namespace flashmace_kokkos {

// Whether copies between DeviceType's memory and the host cross a bus (counted as host<->device
// copies, core/host_transfers.h); on a host memory space they do not.
template <class DeviceType>
constexpr bool kCrossesBus = !std::is_same<typename DeviceType::memory_space, Kokkos::HostSpace>::value;

template <class DeviceType>
class KokkosDeviceRows : public flashmace_lammps::DeviceRows {
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  using DeviceView = Kokkos::View<double*, DeviceType, Unmanaged>;
  using HostView = Kokkos::View<double*, Kokkos::HostSpace, Unmanaged>;

 public:
  KokkosDeviceRows(LAMMPS_NS::LAMMPS* lmp, LAMMPS_NS::Pair* pair) : lmp_(lmp), pair_(pair) {}

  // CommKokkos (not CommTiledKokkos, nor with `-pk kokkos comm/pair/forward host`) calls the pair's
  // device pack/unpack for a pair that runs on the device.
  bool forward_on_device() const override {
    const auto* comm = dynamic_cast<const LAMMPS_NS::CommKokkos*>(lmp_->comm);
    return pair_->execution_space == LAMMPS_NS::Device && comm && !comm->forward_pair_comm_classic;
  }
  double* scratch(std::size_t n) override { return grown(scratch_, n, "mace/flash/kk:halo_scratch"); }
  void to_host(double* host, const double* device, std::size_t n) override {
    Kokkos::deep_copy(HostView(host, n), DeviceView(const_cast<double*>(device), n));
    if (kCrossesBus<DeviceType>) flashmace::count_to_host(static_cast<int64_t>(sizeof(double) * n));
  }
  void to_device(double* device, const double* host, std::size_t n) override {
    Kokkos::deep_copy(DeviceView(device, n), HostView(const_cast<double*>(host), n));
    if (kCrossesBus<DeviceType>) flashmace::count_to_device(static_cast<int64_t>(sizeof(double) * n));
  }
  void add_to_device(double* device, const double* host, std::size_t n) override {
    const DeviceView sums(grown(sums_, n, "mace/flash/kk:halo_sums"), n), rows(device, n);
    Kokkos::deep_copy(sums, HostView(const_cast<double*>(host), n));
    if (kCrossesBus<DeviceType>) flashmace::count_to_device(static_cast<int64_t>(sizeof(double) * n));
    Kokkos::parallel_for("mace/flash/kk:add_rows", Kokkos::RangePolicy<typename DeviceType::execution_space>(0, n),
                         KOKKOS_LAMBDA(const std::size_t i) { rows(i) += sums(i); });
    DeviceType().fence();
  }
  void zero(double* device, std::size_t n) override { Kokkos::deep_copy(DeviceView(device, n), 0.0); }
  void fence() override { DeviceType().fence(); }

 private:
  static double* grown(Kokkos::View<double*, DeviceType>& view, std::size_t n, const char* label) {
    if (view.extent(0) < n) view = Kokkos::View<double*, DeviceType>(std::string(label), n);
    return view.data();
  }

  LAMMPS_NS::LAMMPS* lmp_;
  LAMMPS_NS::Pair* pair_;
  Kokkos::View<double*, DeviceType> scratch_, sums_;
};

}  // namespace flashmace_kokkos
