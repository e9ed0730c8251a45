#pragma once
// Kokkos kernels of the per-layer ghost exchange: node-feature (forward) and gradient (reverse) rows
// to and from LAMMPS's communication buffers. rows: [nlocal + nghost][ncols] row-major doubles in
// DeviceType's memory; buf: LAMMPS's buffer of one swap, atoms one after another, ncols values each.
// One thread per (atom of the swap, column); a swap lists an atom at most once, so the reverse
// unpack's += has one writer per row.
#include "kokkos_type.h"

namespace flashmace_kokkos {

template <class DeviceType>
using Rows = Kokkos::View<double**, Kokkos::LayoutRight, DeviceType, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class DeviceType>
using Buffer = Kokkos::View<double*, DeviceType, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class DeviceType>
Rows<DeviceType> wrap_rows(double* rows, int nrows, int ncols) {
  return Rows<DeviceType>(rows, nrows, ncols);
}

template <class DeviceType>
Kokkos::MDRangePolicy<typename DeviceType::execution_space, Kokkos::Rank<2>> cells(int n, int ncols) {
  return Kokkos::MDRangePolicy<typename DeviceType::execution_space, Kokkos::Rank<2>>({0, 0}, {n, ncols});
}

// Forward pack: buf[k][c] = rows[list[k]][c]. Returns the values packed.
template <class DeviceType, class List>
int pack_rows(int n, const List& list, const Rows<DeviceType>& rows, const Buffer<DeviceType>& buf) {
  const int ncols = rows.extent(1);
  Kokkos::parallel_for("mace/flash/kk:pack_rows", cells<DeviceType>(n, ncols),
                       KOKKOS_LAMBDA(const int k, const int c) { buf(k * ncols + c) = rows(list(k), c); });
  return n * ncols;
}

// Forward unpack: rows[first + k][c] = buf[k][c] (ghost rows).
template <class DeviceType>
void unpack_rows(int n, int first, const Rows<DeviceType>& rows, const Buffer<DeviceType>& buf) {
  const int ncols = rows.extent(1);
  Kokkos::parallel_for("mace/flash/kk:unpack_rows", cells<DeviceType>(n, ncols),
                       KOKKOS_LAMBDA(const int k, const int c) { rows(first + k, c) = buf(k * ncols + c); });
}

// Reverse pack: buf[k][c] = rows[first + k][c] (ghost rows). Returns the values packed.
template <class DeviceType>
int pack_range(int n, int first, const Rows<DeviceType>& rows, const Buffer<DeviceType>& buf) {
  const int ncols = rows.extent(1);
  Kokkos::parallel_for("mace/flash/kk:pack_range", cells<DeviceType>(n, ncols),
                       KOKKOS_LAMBDA(const int k, const int c) { buf(k * ncols + c) = rows(first + k, c); });
  return n * ncols;
}

// Reverse unpack: rows[list[k]][c] += buf[k][c] (owners gather their ghosts' gradients).
template <class DeviceType, class List>
void unpack_add_rows(int n, const List& list, const Rows<DeviceType>& rows, const Buffer<DeviceType>& buf) {
  const int ncols = rows.extent(1);
  Kokkos::parallel_for("mace/flash/kk:unpack_add_rows", cells<DeviceType>(n, ncols),
                       KOKKOS_LAMBDA(const int k, const int c) { rows(list(k), c) += buf(k * ncols + c); });
}

}  // namespace flashmace_kokkos
