#include "sc_test_support.h"

#include "model/mace_params.h"
#include "test_support.h"

namespace flashmace::testing {

void PrintTo(const ScModel& m, std::ostream* os) { *os << m.name; }

std::string sc_model(const std::string& name) { return std::string(FLASHMACE_SC_MODEL_DIR) + "/" + name + ".safetensors"; }

std::vector<ScModel> sc_test_models() {
  std::vector<ScModel> models;
  for (const char* name : {"small_l1", "scalar_l0", "large_l2"}) models.push_back({name, exported_model(name)});
  for (const char* name : {"tiny-cuni", "mp0-small", "mp0-medium", "sc-corr1-l2", "sc-corr2-l2", "sc-corr3-l2", "sc-mixed-l1"})
    models.push_back({name, sc_model(name)});
  return models;
}

ScInputs random_sc_inputs(const ModelFile& file, int layer, int64_t n, uint64_t seed) {
  const MaceConfig& c = file.config();
  const std::string u1 = "products." + std::to_string(layer) + ".symmetric_contractions.contractions.0.U_matrix_1";
  const std::vector<int64_t>& u1_shape = file.tensor(u1).shape;  // [(2l+1,) K, P_1]
  const int64_t K = u1_shape[u1_shape.size() - 2];
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  return {at::randn({n, c.channels(), K}, gen, f64),
          at::randint(c.num_elements(), {n}, gen, at::TensorOptions().dtype(at::kLong))};
}

at::Tensor executor_layout(const ScDescriptor& d, const at::Tensor& A) {
  std::vector<at::Tensor> blocks;
  int64_t first = 0;
  for (const int dim : d.input_dims) {
    const at::Tensor block = A.narrow(2, first, dim);  // [n, C, dim]
    blocks.push_back((d.input_ir_mul ? block.transpose(1, 2) : block).reshape({A.size(0), A.size(1) * dim}));
    first += dim;
  }
  return at::cat(blocks, 1);
}

at::Tensor reference_layout(const ScDescriptor& d, const at::Tensor& a) {
  std::vector<at::Tensor> blocks;
  int64_t first = 0;
  for (const int dim : d.input_dims) {
    const at::Tensor block = a.narrow(1, d.channels * first, d.channels * dim);
    blocks.push_back(d.input_ir_mul ? block.reshape({a.size(0), dim, d.channels}).transpose(1, 2)
                                    : block.view({a.size(0), d.channels, dim}));
    first += dim;
  }
  return at::cat(blocks, 2);
}

ReferenceSc::ReferenceSc(const ModelFile& file, int layer, const at::TensorOptions& options) {
  const MaceConfig& c = file.config();
  const Irreps out = c.layer_output(layer);
  const int nu_max = c.correlation[layer];
  for (std::size_t o = 0; o < out.size(); ++o) {
    const std::string sc =
        "products." + std::to_string(layer) + ".symmetric_contractions.contractions." + std::to_string(o) + ".";
    ContractionWeights cw;
    cw.l_out = out[o].ir.l;
    for (int nu = 1; nu <= nu_max; ++nu) {
      cw.U.push_back(tensor_from_file(file, sc + "U_matrix_" + std::to_string(nu), options));
      const std::string wkey = nu == nu_max ? sc + "weights_max" : sc + "weights." + std::to_string(nu_max - 1 - nu);
      cw.weights.push_back(tensor_from_file(file, wkey, options));
    }
    blocks_.push_back(std::move(cw));
  }
}

at::Tensor ReferenceSc::operator()(const at::Tensor& A, const at::Tensor& species) const {
  std::vector<at::Tensor> parts;
  for (const ContractionWeights& cw : blocks_) parts.push_back(symmetric_contraction(A, species.to(A.device()), cw));
  return at::cat(parts, 1);
}

at::Tensor reference_sc(const ModelFile& file, int layer, const at::Tensor& A, const at::Tensor& species) {
  return ReferenceSc(file, layer, A.options())(A, species);
}

::testing::AssertionResult all_close(const at::Tensor& got_in, const at::Tensor& want_in, double rel_tol) {
  const at::Tensor got = got_in.to(at::kCPU, at::kDouble), want = want_in.to(at::kCPU, at::kDouble);
  if (got.sizes() != want.sizes())
    return ::testing::AssertionFailure() << "shape " << got.sizes() << " vs expected " << want.sizes();
  if (!at::isfinite(got).all().item<bool>()) return ::testing::AssertionFailure() << "result has NaN or Inf";
  if (!at::isfinite(want).all().item<bool>()) return ::testing::AssertionFailure() << "expected value has NaN or Inf";
  const double scale = want.abs().max().item<double>();
  const double err = (got - want).abs().max().item<double>();
  if (err <= rel_tol * scale)
    return ::testing::AssertionSuccess() << "max error " << err << " of scale " << scale;
  return ::testing::AssertionFailure() << "max error " << err << " > " << rel_tol << " * " << scale
                                       << " (relative " << err / scale << ")";
}

}  // namespace flashmace::testing
