#pragma once
// Extended-XYZ reader for one frame: atom count, a comment line with key=value pairs
// (Lattice="ax ay az bx by bz cx cy cz", pbc="T T T", Properties=species:S:1:pos:R:3:...),
// then one line per atom. Plain XYZ (no Properties) is read as species + position, non-periodic.
#include <string>

#include "core/structure.h"

namespace flashmace {

Structure read_extxyz(const std::string& path);  // throws flashmace::Error naming file and line
Structure parse_extxyz(const std::string& text, const std::string& label);

}  // namespace flashmace
