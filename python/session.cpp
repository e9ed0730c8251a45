#include "session.h"

#include <cmath>

#include "core/error.h"
#include "core/model_file.h"
#include "core/mace_config.h"

namespace flashmace::python {

Session::Session(const std::string& model, const std::map<std::string, std::string>& options, double skin)
    : skin_(skin) {
  if (!(skin >= 0)) throw Error("skin must be >= 0 A, got " + std::to_string(skin));
  EngineOptions o;
  for (const auto& [key, value] : options)
    if (!set_engine_option(o, key, value)) throw OptionError("unknown engine option '" + key + "'");
  evaluator_ = make_evaluator(ModelFile::load(model), o);
}

bool Session::list_is_current(const Structure& s) const {
  if (list_id_ == 0 || s.atomic_numbers != listed_.atomic_numbers || s.cell != listed_.cell || s.pbc != listed_.pbc)
    return false;
  // Every pair within r_max now was within r_max + skin when listed if no atom moved more than skin / 2.
  const double limit2 = 0.25 * skin_ * skin_;
  for (std::size_t k = 0; k < s.positions.size(); k += 3) {
    double d2 = 0;
    for (int d = 0; d < 3; ++d) d2 += std::pow(s.positions[k + d] - listed_.positions[k + d], 2);
    if (d2 > limit2) return false;
  }
  return true;
}

void Session::build_list(const Structure& s) {
  check_structure(s);
  list_ = host_list(*evaluator_, s, evaluator_->cutoff() + skin_);
  listed_ = s;
  ++list_id_;
}

Results Session::compute(const Structure& s, bool per_atom) {
  if (!list_is_current(s)) build_list(s);
  std::array<double, 9> cell = s.cell;
  for (int a = 0; a < 3; ++a)
    if (!s.pbc[a])
      for (int d = 0; d < 3; ++d) cell[3 * a + d] = 0;  // (no images along a non-periodic axis)
  LocalPrediction p;
  try {
    p = resident_.evaluate(*evaluator_, list_, list_id_, s.positions.data(), cell, 0.1, nullptr, per_atom);
  } catch (const TooCloseError& e) {
    throw Error("atoms " + std::to_string(e.sender) + " and " + std::to_string(e.receiver) + " are " +
                std::to_string(e.distance) + " A apart, closer than 0.1 A: overlapping atoms");
  }
  Results r;
  r.energy = p.energy;
  r.forces = std::move(p.forces);
  r.virial = p.virial;
  if (per_atom) {
    r.energies = std::move(p.node_energy);
    r.atom_virial = std::move(p.atom_virial);
  }
  return r;
}

}  // namespace flashmace::python
