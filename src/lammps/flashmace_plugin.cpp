// flashmaceplugin.so: `plugin load flashmaceplugin.so` registers pair_style mace/flash in LAMMPS
// builds with the PLUGIN package (plugin_registration.h). The Kokkos variants come from their own
// plugin, built against a Kokkos LAMMPS (kokkos/flashmace_kk_plugin.cpp).
#include "lammps.h"
#include "pair_mace_flash.h"
#include "plugin_registration.h"

using namespace LAMMPS_NS;

namespace {

void* create_mace_flash(void* lmp) { return new PairMACEFlash(static_cast<LAMMPS*>(lmp)); }

}  // namespace

extern "C" void lammpsplugin_init(void* lmp, void* handle, void* regfunc) {
  flashmace_lammps::register_pair_styles(
      lmp, handle, regfunc, "flashmaceplugin.so",
      {{"mace/flash", "MACE interatomic potentials with per-layer ghost exchange (flashmace)", &create_mace_flash}});
}
