// Test host for flashmaceplugin.so on a LAMMPS without the PLUGIN package (Debian's): it does what
// `plugin load` does there (dlopen, call lammpsplugin_init with a registration callback that puts
// pair styles into Force::pair_map), then runs the input like `lmp`.
//   lammps_plugin_host PLUGIN.so [lmp arguments...]
// The executable itself contains no pair style: mace/flash can only come from the plugin.
#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>

#include "comm.h"
#include "force.h"
#include "input.h"
#include "lammps.h"
#include "lammpsplugin.h"

using namespace LAMMPS_NS;

namespace {

void register_style(lammpsplugin_t* plugin, void* lmp) {
  if (std::string(plugin->style) != "pair") {
    std::fprintf(stderr, "lammps_plugin_host: unexpected %s style %s\n", plugin->style, plugin->name);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  auto* host = static_cast<LAMMPS*>(lmp);
  if (host->comm->me == 0)
    std::printf("Loading plugin: %s by %s (built for LAMMPS %s)\n", plugin->info, plugin->author, plugin->version);
  (*host->force->pair_map)[plugin->name] = reinterpret_cast<Force::PairCreator>(plugin->creator.v1);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: lammps_plugin_host PLUGIN.so [lmp arguments...]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  void* handle = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  auto init = handle ? reinterpret_cast<lammpsplugin_initfunc>(dlsym(handle, "lammpsplugin_init")) : nullptr;
  if (!init) {
    std::fprintf(stderr, "lammps_plugin_host: cannot load %s: %s\n", argv[1], dlerror());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  argv[1] = argv[0];  // LAMMPS sees the remaining arguments, as from `lmp`
  try {
    auto* lmp = new LAMMPS(argc - 1, argv + 1, MPI_COMM_WORLD);
    init(lmp, handle, reinterpret_cast<void*>(&register_style));
    lmp->input->file();
    delete lmp;
  } catch (const std::exception&) {
    // LAMMPS (built with exceptions, as Debian's) has printed the error: stop like `lmp` does.
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}
