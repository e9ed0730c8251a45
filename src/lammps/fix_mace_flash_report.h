#pragma once
// The internal fix through which pair_style mace/flash prints its halo-exchange report at the end
// of every run and minimisation on LAMMPS releases without Pair::finish() (2022 and older):
// Modify::post_run() comes after a run's last thermo output and before its timing breakdown.
// Newer releases call PairMACEFlash::finish() instead and get no such fix.
#include "fix.h"

namespace LAMMPS_NS {

class FixMACEFlashReport : public Fix {
 public:
  static constexpr const char* kId = "MACE_FLASH_REPORT";  // also its style name (internal: upper case)

  FixMACEFlashReport(class LAMMPS*, int, char**);
  int setmask() override { return 0; }
  void post_run() override;
  // No per-atom data, so nothing to set (as Fix's own). Defined here so that this class's vtable
  // names no LAMMPS function whose signature depends on tagint's width: a plugin built for other
  // integer sizes must still load far enough to say so (plugin_registration.cpp).
  void set_molecule(int, tagint, int, double*, double*, double*) override {}

  // Adds the fix to `lmp` unless it is there (registering its style on the way).
  static void ensure(class LAMMPS* lmp);
};

}  // namespace LAMMPS_NS
