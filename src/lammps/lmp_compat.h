#pragma once
// One source for LAMMPS 29 Sep 2021 (Debian 12) and newer releases (docs/lammps_integration.md
// 3.3). On 24 Mar 2022 LAMMPS renamed the pair communication calls (forward_comm_pair ->
// forward_comm) and added Neighbor::add_request; the headers carry no version macro, so overload
// resolution picks whichever member exists: the `int` candidate (new API) is preferred over the
// `long` one (old API) and drops out by SFINAE when its expression does not compile.
#include "comm.h"
#include "neighbor.h"
#include "pair.h"
#if __has_include("neigh_request.h")
#include "neigh_request.h"  // old API only; Debian's liblammps-dev lacks it (tools/install_deps.sh)
#endif

namespace flashmace_lammps {
namespace detail {

template <typename C, typename P>
auto forward_comm(C* comm, P* pair, int) -> decltype(comm->forward_comm(pair), void()) {
  comm->forward_comm(pair);
}
template <typename C, typename P>
void forward_comm(C* comm, P* pair, long) {
  comm->forward_comm_pair(pair);
}

template <typename C, typename P>
auto reverse_comm(C* comm, P* pair, int) -> decltype(comm->reverse_comm(pair), void()) {
  comm->reverse_comm(pair);
}
template <typename C, typename P>
void reverse_comm(C* comm, P* pair, long) {
  comm->reverse_comm_pair(pair);
}

// The literal 1 is NeighConst::REQ_FULL in every release that has it; naming the constant would
// break the old-API branch, where NeighConst does not exist.
template <typename N, typename P>
auto request_full_list(N* neighbor, P* pair, int /*instance*/, int)
    -> decltype(neighbor->add_request(pair, 1), void()) {
  neighbor->add_request(pair, 1);
}
template <typename N, typename P>
void request_full_list(N* neighbor, P* pair, int instance, long) {
  const int irequest = neighbor->request(pair, instance);
  neighbor->requests[irequest]->half = 0;
  neighbor->requests[irequest]->full = 1;
}

// Pair::finish(): LAMMPS releases after 2022 call it at the end of every run and minimisation
// (Finish::end), so a style can add its own statistics to the timing breakdown.
template <typename P>
constexpr auto has_finish(int) -> decltype(&P::finish, true) {
  return true;
}
template <typename P>
constexpr bool has_finish(long) {
  return false;
}

}  // namespace detail

// Whether this LAMMPS calls Pair::finish() after each run (else the style reports through an internal
// fix, fix_mace_flash_report.h).
constexpr bool pair_has_finish() { return detail::has_finish<LAMMPS_NS::Pair>(0); }

inline void forward_comm(LAMMPS_NS::Comm* comm, LAMMPS_NS::Pair* pair) { detail::forward_comm(comm, pair, 0); }
inline void reverse_comm(LAMMPS_NS::Comm* comm, LAMMPS_NS::Pair* pair) { detail::reverse_comm(comm, pair, 0); }
// `instance` is the pair's instance_me (protected in Pair, so the pair passes it in).
inline void request_full_neighbor_list(LAMMPS_NS::Neighbor* neighbor, LAMMPS_NS::Pair* pair, int instance) {
  detail::request_full_list(neighbor, pair, instance, 0);
}

}  // namespace flashmace_lammps
