// flashmace-lmp: `lmp` with pair_style mace/flash built in, for LAMMPS libraries without the PLUGIN
// package (Debian's). It takes the same command line as `lmp` (-in, -var, -log, -screen, -echo,
// -partition, ...): LAMMPS parses it; this program only registers the style before the input runs.
#include <mpi.h>

#include <cstdio>
#include <exception>

#include "force.h"
#include "input.h"
#include "lammps.h"
#include "pair_mace_flash.h"

using namespace LAMMPS_NS;

namespace {

Pair* create_mace_flash(LAMMPS* lmp) { return new PairMACEFlash(lmp); }

}  // namespace

int main(int argc, char** argv) {
  // The fast path makes every halo exchange on this thread. The reference path on CUDA runs its
  // backward pass (and with it the reverse exchange) on LibTorch's device thread while this one
  // waits: MPI calls from one thread at a time, which MPI_THREAD_SERIALIZED allows.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_SERIALIZED && rank == 0)
    std::fprintf(stderr, "flashmace-lmp: WARNING: this MPI library grants thread level %d, below "
                         "MPI_THREAD_SERIALIZED: use path fast (the default) for multi-rank GPU runs, not "
                         "path reference\n", provided);
  try {
    auto* lmp = new LAMMPS(argc, argv, MPI_COMM_WORLD);
    // Force::pair_map is public; this is what the PLUGIN package's plugin_register() does.
    (*lmp->force->pair_map)["mace/flash"] = &create_mace_flash;
    lmp->input->file();
    delete lmp;
  } catch (const std::exception&) {
    // LAMMPS builds with exceptions (all since 2023) throw after printing the error, as stock lmp.
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
