#include "fix_mace_flash_report.h"

#include "force.h"
#include "lammps.h"
#include "modify.h"
#include "pair_mace_flash.h"

using namespace LAMMPS_NS;

namespace {

Fix* create_report_fix(LAMMPS* lmp, int narg, char** arg) { return new FixMACEFlashReport(lmp, narg, arg); }

}  // namespace

FixMACEFlashReport::FixMACEFlashReport(LAMMPS* lmp, int narg, char** arg) : Fix(lmp, narg, arg) {}

void FixMACEFlashReport::post_run() {
  // (the pair style may have been replaced since: then there is nothing to report; under pair_style
  // hybrid it is the sub-style)
  if (auto* pair = dynamic_cast<PairMACEFlash*>(force->pair_match("mace/flash", 0))) pair->finish();
}

void FixMACEFlashReport::ensure(LAMMPS* lmp) {
  if (lmp->modify->find_fix(kId) >= 0) return;
  (*lmp->modify->fix_map)[kId] = &create_report_fix;
  lmp->modify->add_fix(std::string(kId) + " all " + kId);
}
