#pragma once
// The per-structure inputs a model may embed into its atoms' features (mace-torch's embedding_specs,
// MACE-OMOL's total charge and spin; docs/model-format.md "System embeddings"): the values a run
// gives (pair_style keywords charge, spin, elec_temp; --charge, --spin, --elec-temp), the defaults
// mace-torch uses where a structure gives none, and their fold into the model. For one structure
// the embedding is one vector added to every atom's features, so it folds into the node embedding,
// and the embedding readout's per-atom energy into the E0s: both paths then run the model as is.
#include <map>
#include <string>

#include "core/model_file.h"

namespace flashmace {

using SystemInputs = std::map<std::string, double>;  // total_charge, total_spin, elec_temp -> value

// The value of `name` for a run: the given one, else mace-torch's default (charge 0, spin 1, elec_temp 0).
double system_input(const SystemInputs& given, const std::string& name);

// The model with its system embeddings evaluated at `given` and folded in (none left). Throws, naming
// the input, for a value given to an input the model does not read, and for a categorical value that
// is not an integer or lies outside the model's classes. *summary (if given) says what was used, e.g.
// "total_charge 0 (default), total_spin 1 (default)"; "" without system embeddings.
ModelFile fold_system_inputs(const ModelFile& file, const SystemInputs& given, std::string* summary = nullptr);

}  // namespace flashmace
