#include "sc/sc_descriptor.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "core/mace_tensor_names.h"
#include "core/model_file.h"
#include "sc/sc_path_reduction.h"

namespace flashmace {

namespace {

// Degree first, then lexicographic: parents (prefixes) sort before their children.
struct DegreeLex {
  bool operator()(const std::vector<int32_t>& a, const std::vector<int32_t>& b) const {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  }
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Merged coefficients of one block before the monomials are numbered: (m, tuple, P) -> coeff.
using RawTerms = std::map<std::tuple<int, std::vector<int32_t>, int>, double>;

// The input blocks' dimensions: the interaction's target irreps, C channels each (node_stage.h),
// K components per channel as the coupling tensors say.
std::vector<int> input_dims(const ModelFile& file, int layer, int K) {
  const Irreps target = file.config().interaction_target();
  const int C = file.config().channels();
  std::vector<int> dims;
  int components = 0;
  for (const MulIr& b : target.blocks()) {
    if (b.mul != C)
      throw Error("Model file " + file.path() + ": the input of product " + std::to_string(layer) + " has a block of " +
                  std::to_string(b.mul) + " channels, expected " + std::to_string(C) + " channels per block");
    dims.push_back(b.ir.dim());
    components += b.ir.dim();
  }
  if (components != K)
    throw Error("Model file " + file.path() + ": the coupling tensors of product " + std::to_string(layer) + " have " +
                std::to_string(K) + " components per channel, but its input irreps " + target.str() + " have " +
                std::to_string(components));
  return dims;
}

}  // namespace

std::size_t ScDescriptor::num_terms() const {
  std::size_t n = 0;
  for (const auto& b : blocks) n += b.terms.size();
  return n;
}

ScDescriptor build_sc_descriptor(const ModelFile& file, int layer, const ScDescriptorOptions& options) {
  const MaceConfig& config = file.config();
  if (layer < 0 || layer >= config.num_interactions)
    throw Error("Model file " + file.path() + ": no product layer " + std::to_string(layer) + " (the model has " +
                std::to_string(config.num_interactions) + ")");
  ScDescriptor d;
  d.layer = layer;
  d.correlation = config.correlation[layer];
  d.shared_weights = config.use_agnostic_product;
  d.num_elements = d.shared_weights ? 1 : config.num_elements();
  d.channels = config.channels();
  const Irreps out = config.layer_output(layer);
  const int Z = d.num_elements, C = d.channels, nu_max = d.correlation;

  std::vector<RawTerms> raw(out.size());
  std::map<std::vector<int32_t>, int32_t, DegreeLex> monomial_index;
  for (std::size_t o = 0; o < out.size(); ++o) {
    ScBlock block;
    block.l = out[o].ir.l;
    block.out_offset = d.out_dim;
    if (out[o].mul != C)
      throw Error("Model file " + file.path() + ": output block " + std::to_string(o) + " of product " +
                  std::to_string(layer) + " has multiplicity " + std::to_string(out[o].mul) + ", expected " +
                  std::to_string(C) + " channels");
    d.out_dim += C * block.dim();
    std::vector<std::vector<double>> weights_nu;
    for (int nu = 1; nu <= nu_max; ++nu) {
      const std::string ukey = mace_tensors::sc_coupling(layer, o, nu);
      const TensorView& u = file.tensor(ukey);
      // mace_spec.md 7.2: [(2L+1,)] + [K]*nu + [P_nu]; the leading dim is absent for L = 0.
      const std::size_t lead = block.l > 0 ? 1 : 0;
      if (d.num_components == 0 && u.shape.size() == lead + nu + 1) d.num_components = static_cast<int>(u.shape[lead]);
      const int K = d.num_components;
      bool ok = u.shape.size() == lead + nu + 1 && (lead == 0 || u.shape[0] == block.dim());
      for (int i = 0; ok && i < nu; ++i) ok = u.shape[lead + i] == K;
      if (!ok)
        throw Error("Model file " + file.path() + ": tensor '" + ukey + "' has shape " + shape_str(u.shape) +
                    ", expected [" + (lead ? std::to_string(block.dim()) + ", " : "") + "K]*" + std::to_string(nu) +
                    " + [paths] with K = " + std::to_string(K));
      const int P = static_cast<int>(u.shape.back());
      const std::string wkey = mace_tensors::sc_weights(layer, o, nu, nu_max);
      const TensorView& w = file.tensor(wkey);
      if (w.shape != std::vector<int64_t>{Z, P, C})
        throw Error("Model file " + file.path() + ": tensor '" + wkey + "' has shape " + shape_str(w.shape) +
                    ", expected " + shape_str({Z, P, C}));

      // Walk U in row-major order; the digits of the flat index are (m, k_1..k_nu, p).
      const std::vector<double> values = file.file().to_doubles(ukey);
      std::vector<sc_detail::PathRow> rows(P);
      std::vector<int32_t> k(nu);
      for (std::size_t flat = 0; flat < values.size(); ++flat) {
        if (values[flat] == 0.0) continue;
        std::size_t rest = flat;
        const int p = static_cast<int>(rest % P);
        rest /= P;
        for (int i = nu - 1; i >= 0; --i) {
          k[i] = static_cast<int32_t>(rest % K);
          rest /= K;
        }
        const int m = static_cast<int>(rest);
        std::vector<int32_t> sorted = k;
        std::sort(sorted.begin(), sorted.end());
        rows[p][{m, sorted}] += values[flat];
      }
      // Permutations can cancel exactly; those terms go.
      for (auto& row : rows)
        for (auto it = row.begin(); it != row.end();) it = it->second == 0.0 ? row.erase(it) : std::next(it);

      sc_detail::ReducedPaths paths{rows, file.file().to_doubles(wkey)};
      if (options.reduce_paths)
        paths = sc_detail::reduce_paths(rows, paths.weights, Z, C,
                                        config.dtype == "float32" ? sc_detail::kReduceFloat32 : sc_detail::kReduceFloat64);
      const int kept = static_cast<int>(paths.rows.size());
      block.source_paths.push_back(P);
      block.path_offset.push_back(block.total_paths);
      block.num_paths.push_back(kept);
      for (int p = 0; p < kept; ++p)
        for (const auto& [key, coeff] : paths.rows[p]) raw[o][{key.first, key.second, block.total_paths + p}] = coeff;
      weights_nu.push_back(std::move(paths.weights));
      block.total_paths += kept;
    }

    block.weights.assign(static_cast<std::size_t>(Z) * block.total_paths * C, 0.0);
    for (int nu = 1; nu <= nu_max; ++nu) {
      const int P = block.num_paths[nu - 1];
      for (int z = 0; z < Z; ++z)
        for (int p = 0; p < P; ++p)
          std::copy_n(&weights_nu[nu - 1][(static_cast<std::size_t>(z) * P + p) * C], C,
                      &block.weights[(static_cast<std::size_t>(z) * block.total_paths + block.path_offset[nu - 1] + p) * C]);
    }

    for (const auto& [key, coeff] : raw[o])
      for (std::vector<int32_t> t = std::get<1>(key); !t.empty(); t.pop_back()) monomial_index.emplace(t, 0);
    d.blocks.push_back(std::move(block));
  }

  d.input_dims = input_dims(file, layer, d.num_components);
  for (auto& [k, index] : monomial_index) {
    index = static_cast<int32_t>(d.monomials.size());
    ScMonomial mono;
    mono.k = k;
    mono.last = k.back();
    if (k.size() > 1) mono.parent = monomial_index.at(std::vector<int32_t>(k.begin(), k.end() - 1));
    d.monomials.push_back(std::move(mono));
  }

  for (std::size_t o = 0; o < out.size(); ++o) {
    ScBlock& block = d.blocks[o];
    block.nonzeros_per_nu.assign(nu_max, 0);
    for (const auto& [key, coeff] : raw[o]) {
      const auto& [m, tuple, path] = key;
      block.terms.push_back({m, monomial_index.at(tuple), path, coeff});
      ++block.nonzeros_per_nu[tuple.size() - 1];
    }
    std::sort(block.terms.begin(), block.terms.end(), [](const ScTerm& a, const ScTerm& b) {
      return std::tie(a.m, a.mono, a.path) < std::tie(b.m, b.mono, b.path);
    });
  }
  return d;
}

ScInputColumns sc_input_columns(const ScDescriptor& d) {
  ScInputColumns c;
  int first = 0;
  for (const int dim : d.input_dims) {
    for (int m = 0; m < dim; ++m) {
      c.base.push_back(d.input_ir_mul ? d.channels * (first + m) : d.channels * first + m);
      c.stride.push_back(d.input_ir_mul ? 1 : dim);
    }
    first += dim;
  }
  return c;
}

std::string describe(const ScDescriptor& d) {
  std::ostringstream s;
  s << "SC layer " << d.layer << ": K=" << d.num_components << " C=" << d.channels << " Z=" << d.num_elements
    << " correlation=" << d.correlation << ", " << d.monomials.size() << " monomials, " << d.num_terms()
    << " terms\n";
  for (const auto& b : d.blocks) {
    s << "  l=" << b.l << ": paths kept/stored per order";
    for (std::size_t nu = 0; nu < b.num_paths.size(); ++nu) s << ' ' << b.num_paths[nu] << '/' << b.source_paths[nu];
    s << "; terms per order";
    for (int n : b.nonzeros_per_nu) s << ' ' << n;
    s << '\n';
  }
  return s.str();
}

}  // namespace flashmace
