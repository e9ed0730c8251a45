// flashmaceplugin.so: `plugin load flashmaceplugin.so` registers pair_style mace/flash in LAMMPS
// builds with the PLUGIN package (lammpsplugin.h: the C registration struct, unchanged since 2021).
// LAMMPS does not check the C++ ABI: compile against the headers of the LAMMPS that loads it.
#include "lammps.h"
#include "lammpsplugin.h"
#include "pair_mace_flash.h"
#if __has_include("version.h")  // in source trees; not installed by LAMMPS 2021
#include "version.h"
#endif

using namespace LAMMPS_NS;

namespace {

void* create_mace_flash(void* lmp) { return new PairMACEFlash(static_cast<LAMMPS*>(lmp)); }

}  // namespace

extern "C" void lammpsplugin_init(void* lmp, void* handle, void* regfunc) {
  lammpsplugin_t plugin{};
#ifdef LAMMPS_VERSION
  plugin.version = LAMMPS_VERSION;  // LAMMPS warns when it differs from its own
#else
  plugin.version = static_cast<LAMMPS*>(lmp)->version;
#endif
  plugin.style = "pair";
  plugin.name = "mace/flash";
  plugin.info = "MACE interatomic potentials with per-layer ghost exchange (flashmace)";
  plugin.author = "flashmace developers";
  plugin.creator.v1 = &create_mace_flash;
  plugin.handle = handle;
  reinterpret_cast<lammpsplugin_regfunc>(regfunc)(&plugin, lmp);
}
