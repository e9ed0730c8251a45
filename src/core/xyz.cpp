#include "core/xyz.h"

#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/mace_config.h"

namespace flashmace {

namespace {

constexpr int kMaxColumns = 1 << 20;  // columns per atom line that Properties may declare

// key=value pairs of the comment line; values may be double-quoted.
std::map<std::string, std::string> parse_comment(const std::string& line) {
  std::map<std::string, std::string> kv;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const std::size_t kstart = i;
    while (i < line.size() && line[i] != '=' && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    std::string key = line.substr(kstart, i - kstart);
    std::string value;
    if (i < line.size() && line[i] == '=') {
      ++i;
      if (i < line.size() && line[i] == '"') {
        const std::size_t end = line.find('"', i + 1);
        value = line.substr(i + 1, end == std::string::npos ? std::string::npos : end - i - 1);
        i = end == std::string::npos ? line.size() : end + 1;
      } else {
        const std::size_t vstart = i;
        while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
        value = line.substr(vstart, i - vstart);
      }
    }
    if (!key.empty()) kv[key] = value;
  }
  return kv;
}

bool parse_bool(const std::string& s) { return s == "T" || s == "True" || s == "true" || s == "1"; }

}  // namespace

Structure parse_extxyz(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  std::string line;
  const std::string where = "XYZ file " + label + ": ";
  if (!std::getline(in, line)) throw Error(where + "empty file");
  int n = -1;
  std::size_t used = 0;
  try {
    n = std::stoi(line, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || line.find_first_not_of(" \t\r", used) != std::string::npos)
    throw Error(where + "line 1 must hold the number of atoms, got '" + line + "'");
  if (n < 0) throw Error(where + "negative atom count");
  std::string comment;
  std::getline(in, comment);
  const auto kv = parse_comment(comment);

  Structure s;
  if (kv.count("Lattice")) {
    std::istringstream ls(kv.at("Lattice"));
    for (double& v : s.cell)
      if (!(ls >> v)) throw Error(where + "Lattice needs 9 numbers");
    s.pbc = {true, true, true};
  }
  if (kv.count("pbc")) {
    std::istringstream ps(kv.at("pbc"));
    std::string b;
    for (int d = 0; d < 3; ++d) {
      if (!(ps >> b)) throw Error(where + "pbc needs 3 values (e.g. pbc=\"T T T\")");
      s.pbc[d] = parse_bool(b);
    }
  }
  if (s.periodic() && !kv.count("Lattice")) throw Error(where + "pbc is set but there is no Lattice");

  // Columns of species and positions from Properties (name:type:count triples).
  int species_col = 0, pos_col = 1, ncols = 4;
  if (kv.count("Properties")) {
    std::vector<std::string> f;
    std::stringstream ps(kv.at("Properties"));
    std::string item;
    while (std::getline(ps, item, ':')) f.push_back(item);
    if (f.size() % 3 != 0) throw Error(where + "Properties must be name:type:count triples");
    species_col = pos_col = -1;
    int col = 0;
    for (std::size_t k = 0; k < f.size(); k += 3) {
      int count = 0;
      try {
        count = std::stoi(f[k + 2]);
      } catch (const std::exception&) {
        count = 0;
      }
      if (count < 1) throw Error(where + "Properties entry '" + f[k] + "' has a bad column count '" + f[k + 2] + "'");
      // (a line of text holds far fewer columns; the bound also keeps the column sum in range)
      if (count > kMaxColumns - col)
        throw Error(where + "Properties lists more than " + std::to_string(kMaxColumns) + " columns (entry '" + f[k] +
                    "' with " + f[k + 2] + ")");
      if ((f[k] == "species" && count != 1) || (f[k] == "pos" && count != 3))
        throw Error(where + "Properties needs species:S:1 and pos:R:3, got " + f[k] + " with " + f[k + 2] + " columns");
      if (f[k] == "species") species_col = col;
      if (f[k] == "pos") pos_col = col;
      col += count;
    }
    ncols = col;
    if (species_col < 0 || pos_col < 0) throw Error(where + "Properties must include species and pos");
  }

  for (int i = 0; i < n; ++i) {
    if (!std::getline(in, line))
      throw Error(where + "expected " + std::to_string(n) + " atom lines, found " + std::to_string(i));
    std::istringstream ls(line);
    std::vector<std::string> tok;
    std::string t;
    while (ls >> t) tok.push_back(t);
    if (static_cast<int>(tok.size()) < ncols)
      throw Error(where + "line " + std::to_string(i + 3) + " has " + std::to_string(tok.size()) +
                  " columns, expected " + std::to_string(ncols));
    const int z = atomic_number_from_symbol(tok[species_col]);
    if (z == 0) throw Error(where + "line " + std::to_string(i + 3) + ": unknown element '" + tok[species_col] + "'");
    s.atomic_numbers.push_back(z);
    for (int d = 0; d < 3; ++d) {
      try {
        s.positions.push_back(std::stod(tok[pos_col + d]));
      } catch (const std::exception&) {
        throw Error(where + "line " + std::to_string(i + 3) + ": cannot read coordinate '" + tok[pos_col + d] + "'");
      }
    }
  }
  return s;
}

Structure read_extxyz(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("Cannot open XYZ file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_extxyz(ss.str(), path);
}

}  // namespace flashmace
