#pragma once
// The evaluator's list (engine/evaluator.h GraphView with positions and list_id) built from
// LAMMPS's Kokkos views at each neighbour-list build: species, and every pair of the full
// neighbour list, skin included (the engine applies the cutoff on its device every step), in
// neighbour-list order (receiver i local, sender j). With `owner` (one rank: the owned atom each
// ghost is an image of) ghosts are folded: sender = owner, image = the ghost's lattice offset from
// it, and the graph has no ghost rows. Count per receiver, exclusive scan, fill: one thread per
// receiver in each pass. The arrays grow and are reused.
#include <cmath>
#include <cstdint>

#include "kokkos_type.h"
#include "neigh_list_kokkos.h"

namespace flashmace_kokkos {

template <class DeviceType>
struct EdgeList {
  Kokkos::View<int64_t*, DeviceType> species;                       // [graph rows]
  Kokkos::View<int64_t*, DeviceType> sender, receiver;              // [>= nedges]
  Kokkos::View<int32_t* [3], Kokkos::LayoutRight, DeviceType> image;  // [>= nedges]
  Kokkos::View<int64_t*, DeviceType> offset;                        // [inum + 1]
  int64_t nedges = 0;
  int rows = 0;  // graph rows: nlocal when folded, else local and ghost atoms
};

// x, type: LAMMPS's views (atomKK->k_x, k_type on DeviceType); type_species: [ntypes + 1] element
// index per atom type; owner: [nghost] or empty (no folding); h: domain->h (xprd yprd zprd yz xz xy).
template <class DeviceType, class Positions, class Types>
void build_skin_list(LAMMPS_NS::NeighListKokkos<DeviceType>* list, int nlocal, int ntotal, const Positions& x,
                     const Types& type, const Kokkos::View<int64_t*, DeviceType>& type_species,
                     const Kokkos::View<int*, DeviceType>& owner, const double* h, EdgeList<DeviceType>& edges) {
  using exec = typename DeviceType::execution_space;
  const int inum = list->inum;
  const auto ilist = list->d_ilist;
  const auto numneigh = list->d_numneigh;
  const auto neighbors = list->d_neighbors;
  const bool fold = owner.extent(0) > 0 || ntotal == nlocal;
  edges.rows = fold ? nlocal : ntotal;

  if (static_cast<int>(edges.species.extent(0)) < edges.rows)
    edges.species = Kokkos::View<int64_t*, DeviceType>("mace/flash/kk:species", edges.rows);
  const auto species = edges.species;
  Kokkos::parallel_for("mace/flash/kk:species", Kokkos::RangePolicy<exec>(0, edges.rows),
                       KOKKOS_LAMBDA(const int i) { species(i) = type_species(type(i)); });

  if (static_cast<int>(edges.offset.extent(0)) < inum + 1)
    edges.offset = Kokkos::View<int64_t*, DeviceType>("mace/flash/kk:offset", inum + 1);
  const auto offset = edges.offset;
  int64_t total = 0;
  Kokkos::parallel_scan(
      "mace/flash/kk:edge_offsets", Kokkos::RangePolicy<exec>(0, inum + 1),
      KOKKOS_LAMBDA(const int k, int64_t& partial, const bool final) {
        if (final) offset(k) = partial;
        if (k < inum) partial += numneigh(ilist(k));
      },
      total);
  edges.nedges = total;

  if (static_cast<int64_t>(edges.sender.extent(0)) < total) {
    const int64_t capacity = total + total / 8 + 16;  // room to grow without reallocating at every build
    edges.sender = Kokkos::View<int64_t*, DeviceType>("mace/flash/kk:sender", capacity);
    edges.receiver = Kokkos::View<int64_t*, DeviceType>("mace/flash/kk:receiver", capacity);
    edges.image = Kokkos::View<int32_t* [3], Kokkos::LayoutRight, DeviceType>("mace/flash/kk:image", capacity);
  }
  const auto sender = edges.sender;
  const auto receiver = edges.receiver;
  const auto image = edges.image;
  const double xprd = h[0], yprd = h[1], zprd = h[2], yz = h[3], xz = h[4], xy = h[5];
  Kokkos::parallel_for(
      "mace/flash/kk:fill_edges", Kokkos::RangePolicy<exec>(0, inum), KOKKOS_LAMBDA(const int ii) {
        const int i = ilist(ii);
        int64_t e = offset(ii);
        for (int jj = 0; jj < numneigh(i); ++jj) {
          const int j = neighbors(i, jj) & NEIGHMASK;
          int s = j, na = 0, nb = 0, nc = 0;
          if (fold && j >= nlocal) {
            // x_j = x_s + na a + nb b + nc c, a = (xprd, 0, 0), b = (xy, yprd, 0), c = (xz, yz, zprd).
            s = owner(j - nlocal);
            const double dx = x(j, 0) - x(s, 0), dy = x(j, 1) - x(s, 1), dz = x(j, 2) - x(s, 2);
            nc = static_cast<int>(floor(dz / zprd + 0.5));
            nb = static_cast<int>(floor((dy - nc * yz) / yprd + 0.5));
            na = static_cast<int>(floor((dx - nb * xy - nc * xz) / xprd + 0.5));
          }
          sender(e) = s;
          receiver(e) = i;
          image(e, 0) = na;
          image(e, 1) = nb;
          image(e, 2) = nc;
          ++e;
        }
      });
}

}  // namespace flashmace_kokkos
