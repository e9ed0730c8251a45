// flashmacekkplugin.so: `plugin load flashmacekkplugin.so` in a LAMMPS with the KOKKOS and PLUGIN
// packages registers pair_style mace/flash and its Kokkos variants (plugin_registration.h):
//   mace/flash/kk, mace/flash/kk/device  Kokkos's default device (what -sf kk picks: Force::new_pair
//                                        tries style + "/" + suffix first)
//   mace/flash/kk/host                   Kokkos's host space (the same class on CPU-only Kokkos)
// The in-tree PairStyle(...) macros only work inside LAMMPS's build; a plugin registers the names.
#include "lammps.h"
#include "pair_mace_flash.h"
#include "pair_mace_flash_kokkos.h"
#include "plugin_registration.h"

using namespace LAMMPS_NS;

namespace {

void* create_mace_flash(void* lmp) { return new PairMACEFlash(static_cast<LAMMPS*>(lmp)); }
void* create_device(void* lmp) { return new PairMACEFlashKokkos<LMPDeviceType>(static_cast<LAMMPS*>(lmp)); }
void* create_host(void* lmp) { return new PairMACEFlashKokkos<LMPHostType>(static_cast<LAMMPS*>(lmp)); }

}  // namespace

extern "C" void lammpsplugin_init(void* lmp, void* handle, void* regfunc) {
  const char* plain = "MACE interatomic potentials with per-layer ghost exchange (flashmace)";
  const char* kk = "MACE interatomic potentials with per-layer ghost exchange, Kokkos (flashmace)";
  flashmace_lammps::register_pair_styles(lmp, handle, regfunc, "flashmacekkplugin.so",
                                         {{"mace/flash", plain, &create_mace_flash},
                                          {"mace/flash/kk", kk, &create_device},
                                          {"mace/flash/kk/device", kk, &create_device},
                                          {"mace/flash/kk/host", kk, &create_host}});
}
