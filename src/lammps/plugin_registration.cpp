#include "plugin_registration.h"

#include <string>

#include "error.h"
#include "lammps.h"
#include "lammpsplugin.h"
#include "library.h"
#if __has_include("version.h")  // in source trees; not installed by LAMMPS 2021
#include "version.h"
#endif

using namespace LAMMPS_NS;

namespace flashmace_lammps {

namespace {

// "tagint 4, bigint 8, imageint 4 bytes (LAMMPS_SMALLBIG)"
std::string describe_sizes(int tag, int big, int image) {
  std::string name = "an unusual combination";
  if (tag == 4 && big == 4 && image == 4) name = "LAMMPS_SMALLSMALL";
  if (tag == 4 && big == 8 && image == 4) name = "LAMMPS_SMALLBIG";
  if (tag == 8 && big == 8 && image == 8) name = "LAMMPS_BIGBIG";
  return "tagint " + std::to_string(tag) + ", bigint " + std::to_string(big) + ", imageint " +
         std::to_string(image) + " bytes (" + name + ")";
}

// Empty when the LAMMPS at `lmp` has the integer sizes this file was compiled for, else the error.
// lammps_extract_setting reads them from the running LAMMPS (its library interface, plain C).
std::string integer_size_mismatch(void* lmp, const char* plugin_file) {
  const int tag = lammps_extract_setting(lmp, "tagint");
  const int big = lammps_extract_setting(lmp, "bigint");
  const int image = lammps_extract_setting(lmp, "imageint");
  if (tag == int(sizeof(tagint)) && big == int(sizeof(bigint)) && image == int(sizeof(imageint))) return "";
  return std::string(plugin_file) + " was compiled for LAMMPS integer sizes " +
         describe_sizes(sizeof(tagint), sizeof(bigint), sizeof(imageint)) + ", but this LAMMPS has " +
         describe_sizes(tag, big, image) + ": rebuild the plugin against this LAMMPS's headers "
         "(cmake -DFLASHMACE_LAMMPS_HEADER_DIR=<its include dir> -DFLASHMACE_LAMMPS_INTEGER_SIZES=<its sizes>)";
}

}  // namespace

void register_pair_styles(void* lmp, void* handle, void* regfunc, const char* plugin_file,
                          std::initializer_list<PairStyleEntry> styles) {
  auto* host = static_cast<LAMMPS*>(lmp);
  // LAMMPS's top-level pointers and Error do not depend on the integer sizes, so the error can be
  // raised through them before anything of other sizes is touched; it stops every rank.
  const std::string mismatch = integer_size_mismatch(lmp, plugin_file);
  if (!mismatch.empty()) host->error->all(FLERR, mismatch);
  for (const PairStyleEntry& style : styles) {
    lammpsplugin_t plugin{};
#ifdef LAMMPS_VERSION
    plugin.version = LAMMPS_VERSION;  // LAMMPS warns when it differs from its own
#else
    plugin.version = host->version;
#endif
    plugin.style = "pair";
    plugin.name = style.name;
    plugin.info = style.info;
    plugin.author = "flashmace developers";
    plugin.creator.v1 = style.creator;
    plugin.handle = handle;
    reinterpret_cast<lammpsplugin_regfunc>(regfunc)(&plugin, lmp);
  }
}

}  // namespace flashmace_lammps
