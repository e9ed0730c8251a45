// flashmace-lmp: the LAMMPS executable for LAMMPS libraries without the PLUGIN package (Debian's):
// it registers pair_style mace/flash, then behaves like `lmp` (same command line, input from -in
// or standard input).
#include <mpi.h>

#include "force.h"
#include "input.h"
#include "lammps.h"
#include "pair_mace_flash.h"

using namespace LAMMPS_NS;

namespace {

Pair* create_mace_flash(LAMMPS* lmp) { return new PairMACEFlash(lmp); }

}  // namespace

int main(int argc, char** argv) {
  // The halo exchange may run inside LibTorch's autograd; MPI calls stay serialised.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  auto* lmp = new LAMMPS(argc, argv, MPI_COMM_WORLD);
  (*lmp->force->pair_map)["mace/flash"] = &create_mace_flash;
  lmp->input->file();
  delete lmp;
  MPI_Finalize();
  return 0;
}
