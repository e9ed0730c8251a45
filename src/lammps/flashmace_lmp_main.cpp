// flashmace-lmp: `lmp` with pair_style mace/flash built in, for LAMMPS libraries without the PLUGIN
// package (Debian's). It takes the same command line as `lmp` (-in, -var, -log, -screen, -echo,
// -partition, ...): LAMMPS parses it; this program only registers the style before the input runs.
#include <mpi.h>

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
  // On CUDA, LibTorch runs the backward pass (and with it the reverse halo exchange) on its own
  // device thread while the main thread waits: MPI calls come from one thread at a time.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
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
