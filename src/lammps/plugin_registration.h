#pragma once
// What a flashmace plugin's lammpsplugin_init does (lammpsplugin.h: the C registration struct,
// unchanged since 2021): check that the loading LAMMPS has the integer sizes this plugin was compiled
// for, then register its pair styles. LAMMPS does not check the C++ ABI: compile a plugin against
// the headers of the LAMMPS that loads it. The one part of that ABI a plugin can check is LAMMPS's
// integer sizes (lmptype.h: tagint, bigint, imageint, fixed when LAMMPS is compiled).
#include <initializer_list>

namespace flashmace_lammps {

struct PairStyleEntry {
  const char* name;  // "mace/flash", "mace/flash/kk", ...
  const char* info;
  void* (*creator)(void* lmp);
};

// plugin_file names the library in the integer-size error ("flashmaceplugin.so").
void register_pair_styles(void* lmp, void* handle, void* regfunc, const char* plugin_file,
                          std::initializer_list<PairStyleEntry> styles);

}  // namespace flashmace_lammps
