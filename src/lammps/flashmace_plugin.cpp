// flashmaceplugin.so: `plugin load flashmaceplugin.so` registers pair_style mace/flash in LAMMPS
// builds with the PLUGIN package. The C++ ABI is not checked by LAMMPS: compile against the headers
// of the LAMMPS that loads it.
#include "lammps.h"
#include "lammpsplugin.h"
#include "pair_mace_flash.h"

using namespace LAMMPS_NS;

namespace {

void* create_mace_flash(LAMMPS* lmp) { return new PairMACEFlash(lmp); }

}  // namespace

extern "C" void lammpsplugin_init(void* lmp, void* handle, void* regfunc) {
  lammpsplugin_t plugin{};
  plugin.version = static_cast<LAMMPS*>(lmp)->version;  // the host's own: no version mismatch warning
  plugin.style = "pair";
  plugin.name = "mace/flash";
  plugin.info = "MACE interatomic potentials (flashmace)";
  plugin.author = "flashmace developers";
  plugin.creator.v1 = reinterpret_cast<lammpsplugin_factory1*>(&create_mace_flash);
  plugin.handle = handle;
  reinterpret_cast<lammpsplugin_regfunc>(regfunc)(&plugin, lmp);
}
