#pragma once
// The hyperparameters of a MACE model as stored in a flashmace model file (docs/model-format.md).
// Everything the math needs that is not a tensor lives here; tensors keep MACE's state_dict keys.
#include <string>
#include <vector>

#include "core/irreps.h"

namespace flashmace {

constexpr const char* kFormatName = "flashmace";
constexpr int kFormatVersion = 1;
constexpr const char* kMetadataKey = "flashmace";  // safetensors __metadata__ key of the JSON

struct MaceConfig {
  std::string model_class = "ScaleShiftMACE";
  std::string dtype = "float64";  // dtype of the stored float tensors
  double r_max = 0;
  int num_bessel = 0;
  int num_polynomial_cutoff = 0;
  std::string radial_type = "bessel";
  std::string distance_transform;  // "" (none), "Agnesi" or "Soft"
  bool pair_repulsion = false;
  // false: the radial features carry no envelope; the interactions multiply their radial-MLP
  // outputs (tp weights, edge densities) by it instead (mace_spec.md 3.3; MACE-MH-1, OMOL).
  bool apply_cutoff = true;
  int max_ell = 0;
  std::string hidden_irreps;
  std::string mlp_irreps;
  // The irreps the conv TP runs on (linear_up's output); "" = each layer's input irreps. The first
  // layer uses them only with use_edge_irreps_first, and then only their scalars.
  std::string edge_irreps;
  bool use_edge_irreps_first = false;
  // One symmetric-contraction weight set for every element (weights [1, paths, C]).
  bool use_agnostic_product = false;
  std::string gate = "silu";
  int num_interactions = 0;
  std::vector<int> correlation;  // one per interaction
  std::string interaction_cls_first;
  std::string interaction_cls;
  std::string readout_cls = "NonLinearReadoutBlock";
  std::vector<int> radial_mlp;
  std::vector<int> atomic_numbers;  // ascending; the element index is the position here
  std::vector<double> atomic_energies;     // [heads][elements], head-major
  std::vector<double> avg_num_neighbors;  // one per interaction
  std::vector<double> scale{1.0};         // one per head
  std::vector<double> shift{0.0};         // one per head
  std::vector<std::string> heads;
  // A multi-head file (mace-torch's heads: one shared body, a readout output, E0s and scale/shift per
  // head) is evaluated through ModelFile::select_head, which makes a one-head model of one of them;
  // mlp_irreps is then one head's (the stored readout's hidden width is heads times it).
  // Per-structure inputs embedded into every atom's features (mace-torch's embedding_specs, MACE-OMOL's
  // total charge and spin), in the order their embeddings are concatenated; ModelFile::with_system_inputs
  // folds them into the node embedding (and E0s) for given values.
  struct SystemEmbedding {
    std::string name;                 // total_charge, total_spin or elec_temp
    std::string type;                 // "categorical" (a table row at value + offset) or "continuous"
    int num_classes = 0, offset = 0;  // categorical
    int emb_dim = 0;
    bool use_bias = true;             // continuous: Linear(1, emb) -> SiLU -> Linear(emb, emb)
  };
  std::vector<SystemEmbedding> system_embeddings;
  bool embedding_readout = false;  // a linear energy per atom of its embedded features, added to E0
  std::string provenance_json = "{}";  // free-form, kept verbatim

  // Derived quantities.
  int num_elements() const { return static_cast<int>(atomic_numbers.size()); }
  Irreps hidden() const { return Irreps::parse(hidden_irreps); }
  int channels() const;  // multiplicity of the 0e block of hidden irreps
  Irreps sh_irreps() const { return Irreps::spherical_harmonics(max_ell); }
  Irreps interaction_target() const;  // (sh * C).sort().simplify()
  Irreps layer_input(int t) const;    // node features entering interaction t
  Irreps layer_output(int t) const;   // hidden irreps out of product t
  Irreps layer_edge_irreps(int t) const;  // the conv TP's input irreps in interaction t
  // The gate's input in a NonLinear block: the target's scalars, one gate scalar per channel of
  // each l > 0 block (in block order), then those blocks, simplified (e3nn Gate.irreps_in).
  Irreps gate_input() const;
  const std::string& interaction_class(int t) const { return t == 0 ? interaction_cls_first : interaction_cls; }
  bool residual(int t) const { return interaction_class(t).find("Residual") != std::string::npos; }
  bool density(int t) const { return interaction_class(t).find("Density") != std::string::npos; }
  // RealAgnosticResidualNonLinearInteractionBlock: LayerNorm radial MLPs on (distance, sender and
  // receiver species), a learned density normalisation and a gate (docs/model-format.md).
  bool nonlinear(int t) const { return interaction_class(t).find("NonLinear") != std::string::npos; }
  int sc_elements() const { return use_agnostic_product ? 1 : num_elements(); }
  int element_index(int atomic_number) const;  // -1 if the model does not know the element
  int num_heads() const { return static_cast<int>(heads.size()); }
  // The head used when none is named, as mace-torch's calculator chooses it: the only head, else
  // the first named "default" in any case (a fine-tune's own head beside the foundation model's
  // "pt_head"); "" when there is none (a head must then be named).
  std::string default_head() const;
  int head_index(const std::string& name) const;  // -1 if absent
};

// Parse and validate the metadata JSON; `where` names the file in error messages.
MaceConfig parse_mace_config(const std::string& json_text, const std::string& where);
std::string mace_config_to_json(const MaceConfig& config);

const char* element_symbol(int atomic_number);             // "" outside 1..118
int atomic_number_from_symbol(const std::string& symbol);  // 0 if unknown

}  // namespace flashmace
