#pragma once
// The evaluator's graph (engine/evaluator.h GraphView) built from LAMMPS's Kokkos views: species
// of local and ghost atoms, and the edges of the full neighbour list within r_max, in neighbour-list
// order (receiver i local, sender j local or ghost, vector x_i - x_j as the plain style computes it).
// Count per receiver, exclusive scan, fill: one thread per receiver in each pass. The arrays grow
// and are reused between steps.
#include <cstdint>

#include "kokkos_type.h"
#include "neigh_list_kokkos.h"

namespace flashmace_kokkos {

template <class DeviceType>
struct EdgeList {
  Kokkos::View<int64_t*, DeviceType> species;                     // [ntotal]
  Kokkos::View<int64_t*, DeviceType> sender, receiver;            // [>= nedges]
  Kokkos::View<double* [3], Kokkos::LayoutRight, DeviceType> vectors;  // [>= nedges]
  Kokkos::View<int64_t*, DeviceType> offset;                      // [inum + 1]
  int64_t nedges = 0;
};

// The first receiver (position in ilist) with a neighbour closer than min_distance, or -1.
// Otherwise fills `edges`. type_species: [ntypes + 1] element index per atom type.
// x, type: LAMMPS's views (atomKK->k_x, k_type on DeviceType).
template <class DeviceType, class Positions, class Types>
int build_edge_list(LAMMPS_NS::NeighListKokkos<DeviceType>* list, int ntotal, const Positions& x, const Types& type,
                    const Kokkos::View<int64_t*, DeviceType>& type_species, double cutoff, double min_distance,
                    EdgeList<DeviceType>& edges) {
  using exec = typename DeviceType::execution_space;
  const int inum = list->inum;
  const auto ilist = list->d_ilist;
  const auto numneigh = list->d_numneigh;
  const auto neighbors = list->d_neighbors;
  const double cut2 = cutoff * cutoff, min2 = min_distance * min_distance;

  if (static_cast<int>(edges.species.extent(0)) < ntotal)
    edges.species = Kokkos::View<int64_t*, DeviceType>("mace/flash/kk:species", ntotal);
  const auto species = edges.species;
  Kokkos::parallel_for("mace/flash/kk:species", Kokkos::RangePolicy<exec>(0, ntotal),
                       KOKKOS_LAMBDA(const int i) { species(i) = type_species(type(i)); });

  if (static_cast<int>(edges.offset.extent(0)) < inum + 1)
    edges.offset = Kokkos::View<int64_t*, DeviceType>("mace/flash/kk:offset", inum + 1);
  const auto offset = edges.offset;
  int first_overlap = inum;
  Kokkos::parallel_reduce(
      "mace/flash/kk:count_edges", Kokkos::RangePolicy<exec>(0, inum),
      KOKKOS_LAMBDA(const int ii, int& first) {
        const int i = ilist(ii);
        int64_t count = 0;
        for (int jj = 0; jj < numneigh(i); ++jj) {
          const int j = neighbors(i, jj) & NEIGHMASK;
          const double dx = x(i, 0) - x(j, 0), dy = x(i, 1) - x(j, 1), dz = x(i, 2) - x(j, 2);
          const double r2 = dx * dx + dy * dy + dz * dz;
          if (r2 >= cut2) continue;
          if (r2 < min2 && ii < first) first = ii;
          ++count;
        }
        offset(ii + 1) = count;
      },
      Kokkos::Min<int>(first_overlap));
  if (first_overlap < inum) return first_overlap;

  int64_t total = 0;
  Kokkos::parallel_scan(
      "mace/flash/kk:edge_offsets", Kokkos::RangePolicy<exec>(0, inum + 1),
      KOKKOS_LAMBDA(const int k, int64_t& partial, const bool final) {
        const int64_t count = k == 0 ? 0 : offset(k);
        partial += count;
        if (final) offset(k) = partial;
      },
      total);
  edges.nedges = total;

  if (static_cast<int64_t>(edges.sender.extent(0)) < total) {
    const int64_t capacity = total + total / 8 + 16;  // room to grow without reallocating every step
    edges.sender = Kokkos::View<int64_t*, DeviceType>("mace/flash/kk:sender", capacity);
    edges.receiver = Kokkos::View<int64_t*, DeviceType>("mace/flash/kk:receiver", capacity);
    edges.vectors = Kokkos::View<double* [3], Kokkos::LayoutRight, DeviceType>("mace/flash/kk:vectors", capacity);
  }
  const auto sender = edges.sender;
  const auto receiver = edges.receiver;
  const auto vectors = edges.vectors;
  Kokkos::parallel_for(
      "mace/flash/kk:fill_edges", Kokkos::RangePolicy<exec>(0, inum), KOKKOS_LAMBDA(const int ii) {
        const int i = ilist(ii);
        int64_t e = offset(ii);
        for (int jj = 0; jj < numneigh(i); ++jj) {
          const int j = neighbors(i, jj) & NEIGHMASK;
          const double dx = x(i, 0) - x(j, 0), dy = x(i, 1) - x(j, 1), dz = x(i, 2) - x(j, 2);
          if (dx * dx + dy * dy + dz * dz >= cut2) continue;
          sender(e) = j;
          receiver(e) = i;
          vectors(e, 0) = dx;
          vectors(e, 1) = dy;
          vectors(e, 2) = dz;
          ++e;
        }
      });
  return -1;
}

}  // namespace flashmace_kokkos
