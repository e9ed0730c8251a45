#pragma once
// One source for LAMMPS 29 Sep 2021 (Debian 12) and newer (>= 24 Mar 2022): the pair-comm and
// neighbour-request APIs were renamed, and no version macro exists in the headers, so overloads
// pick whichever member exists (the int/long argument orders the candidates).
#include "comm.h"
#include "neighbor.h"
#if __has_include("neigh_request.h")
#include "neigh_request.h"
#endif

namespace flashmace_lammps {

template <typename C, typename P>
auto forward_comm_impl(C* comm, P* pair, int) -> decltype(comm->forward_comm(pair)) {
  return comm->forward_comm(pair);
}
template <typename C, typename P>
void forward_comm_impl(C* comm, P* pair, long) {
  comm->forward_comm_pair(pair);
}
template <typename C, typename P>
auto reverse_comm_impl(C* comm, P* pair, int) -> decltype(comm->reverse_comm(pair)) {
  return comm->reverse_comm(pair);
}
template <typename C, typename P>
void reverse_comm_impl(C* comm, P* pair, long) {
  comm->reverse_comm_pair(pair);
}

// NeighConst::REQ_FULL is 1 in every version that has it; the literal keeps the 2021 branch valid.
template <typename N, typename P>
auto request_full_impl(N* neighbor, P* pair, int, int) -> decltype(neighbor->add_request(pair, 1), void()) {
  neighbor->add_request(pair, 1);
}
template <typename N, typename P>
void request_full_impl(N* neighbor, P* pair, int instance, long) {
  const int irequest = neighbor->request(pair, instance);
  neighbor->requests[irequest]->half = 0;
  neighbor->requests[irequest]->full = 1;
}

template <typename P>
void forward_comm(LAMMPS_NS::Comm* comm, P* pair) {
  forward_comm_impl(comm, static_cast<LAMMPS_NS::Pair*>(pair), 0);
}
template <typename P>
void reverse_comm(LAMMPS_NS::Comm* comm, P* pair) {
  reverse_comm_impl(comm, static_cast<LAMMPS_NS::Pair*>(pair), 0);
}
template <typename P>
void request_full_neighbor_list(LAMMPS_NS::Neighbor* neighbor, P* pair, int instance) {
  request_full_impl(neighbor, static_cast<LAMMPS_NS::Pair*>(pair), instance, 0);
}

}  // namespace flashmace_lammps
