// The SC descriptor and the generic CPU executor reproduce the reference path's symmetric
// contraction (src/model/symmetric_contraction.cpp, dense einsum form) and its autograd gradient.
#include <gtest/gtest.h>

#include <set>

#include "core/cpu_isa.h"
#include "cpu_isa_support.h"
#include "sc/sc_cpu_executor.h"
#include "sc/sc_descriptor.h"
#include "sc_test_support.h"
#include "test_support.h"

namespace flashmace {
namespace {

using testing::ScModel;

// 37 atoms: a prime, so nothing lines up with tile or chunk sizes by accident.
constexpr int64_t kAtoms = 37;

template <typename T>
at::Tensor executor_forward(const ScDescriptor& d, const at::Tensor& A, const at::Tensor& species) {
  const at::ScalarType st = std::is_same_v<T, float> ? at::kFloat : at::kDouble;
  const at::Tensor a = testing::executor_layout(d, A.to(st)).contiguous();
  at::Tensor B = at::full({A.size(0), d.out_dim}, std::numeric_limits<double>::quiet_NaN(), a.options());
  ScCpuExecutor<T>(d).forward(a.data_ptr<T>(), species.data_ptr<int64_t>(), A.size(0), B.data_ptr<T>());
  return B;
}

template <typename T>
at::Tensor executor_backward(const ScDescriptor& d, const at::Tensor& A, const at::Tensor& species, const at::Tensor& dB) {
  const at::ScalarType st = std::is_same_v<T, float> ? at::kFloat : at::kDouble;
  const at::Tensor a = testing::executor_layout(d, A.to(st)).contiguous(), db = dB.to(st).contiguous();
  at::Tensor dA = at::full_like(a, std::numeric_limits<double>::quiet_NaN());
  ScCpuExecutor<T>(d).backward(a.data_ptr<T>(), species.data_ptr<int64_t>(), db.data_ptr<T>(), A.size(0),
                               dA.data_ptr<T>());
  return testing::reference_layout(d, dA);
}

class ScCpu : public ::testing::TestWithParam<ScModel> {};

TEST_P(ScCpu, DescriptorIsASortedPrefixClosedPolynomial) {
  const ModelFile file = ModelFile::load(GetParam().path);
  for (int t = 0; t < file.config().num_interactions; ++t) {
    const ScDescriptor d = build_sc_descriptor(file, t);
    std::set<std::vector<int32_t>> seen;
    for (std::size_t j = 0; j < d.monomials.size(); ++j) {
      const ScMonomial& m = d.monomials[j];
      ASSERT_FALSE(m.k.empty());
      ASSERT_LE(static_cast<int>(m.k.size()), d.correlation);
      EXPECT_TRUE(std::is_sorted(m.k.begin(), m.k.end()));
      EXPECT_TRUE(seen.insert(m.k).second) << "monomial " << j << " repeated";
      EXPECT_EQ(m.last, m.k.back());
      if (m.k.size() == 1) {
        EXPECT_EQ(m.parent, -1);
      } else {
        ASSERT_GE(m.parent, 0);
        ASSERT_LT(static_cast<std::size_t>(m.parent), j) << "parents precede their children";
        EXPECT_EQ(d.monomials[m.parent].k, std::vector<int32_t>(m.k.begin(), m.k.end() - 1));
      }
    }
    for (const ScBlock& b : d.blocks)
      for (const ScTerm& term : b.terms) {
        EXPECT_NE(term.coeff, 0.0);
        EXPECT_LT(term.m, b.dim());
        EXPECT_LT(term.path, b.total_paths);
        // A term of order nu lives on a path of order nu.
        const int nu = static_cast<int>(d.monomials[term.mono].k.size());
        EXPECT_GE(term.path, b.path_offset[nu - 1]);
        EXPECT_LT(term.path, b.path_offset[nu - 1] + b.num_paths[nu - 1]);
      }
  }
}

TEST_P(ScCpu, ForwardEqualsReferenceFloat64) {
  const ModelFile file = ModelFile::load(GetParam().path);
  for (const bool reduce : {true, false})
  for (int t = 0; t < file.config().num_interactions; ++t) {
    const ScDescriptor d = build_sc_descriptor(file, t, {reduce});
    const testing::ScInputs in = testing::random_sc_inputs(file, t, kAtoms, 100 + t);
    const at::Tensor want = testing::reference_sc(file, t, in.A, in.species);
    EXPECT_TRUE(testing::all_close(executor_forward<double>(d, in.A, in.species), want, testing::kRelTolF64))
        << "layer " << t << (reduce ? ", paths reduced\n" : "\n") << describe(d);
  }
}

TEST_P(ScCpu, BackwardEqualsReferenceAutogradFloat64) {
  const ModelFile file = ModelFile::load(GetParam().path);
  for (const bool reduce : {true, false})
  for (int t = 0; t < file.config().num_interactions; ++t) {
    const ScDescriptor d = build_sc_descriptor(file, t, {reduce});
    const testing::ScInputs in = testing::random_sc_inputs(file, t, kAtoms, 200 + t);
    const at::Tensor A = in.A.clone().requires_grad_(true);
    const at::Tensor B = testing::reference_sc(file, t, A, in.species);
    const at::Tensor dB = at::randn_like(B.detach());
    B.backward(dB);
    const at::Tensor want = A.grad();
    EXPECT_TRUE(testing::all_close(executor_backward<double>(d, in.A, in.species, dB), want, testing::kRelTolF64))
        << "layer " << t << (reduce ? ", paths reduced" : "");
  }
}

// A read from (and dA written to) ir_mul rows, as the fast engine holds them: the same numbers.
TEST_P(ScCpu, IrMulInputEqualsReferenceFloat64) {
  const ModelFile file = ModelFile::load(GetParam().path);
  for (int t = 0; t < file.config().num_interactions; ++t) {
    ScDescriptor d = build_sc_descriptor(file, t);
    d.input_ir_mul = true;
    const testing::ScInputs in = testing::random_sc_inputs(file, t, kAtoms, 300 + t);
    EXPECT_TRUE(testing::all_close(executor_forward<double>(d, in.A, in.species),
                                   testing::reference_sc(file, t, in.A, in.species), testing::kRelTolF64))
        << "layer " << t;
    const at::Tensor A = in.A.clone().requires_grad_(true);
    const at::Tensor B = testing::reference_sc(file, t, A, in.species);
    const at::Tensor dB = at::randn_like(B.detach());
    B.backward(dB);
    EXPECT_TRUE(testing::all_close(executor_backward<double>(d, in.A, in.species, dB), A.grad(), testing::kRelTolF64))
        << "layer " << t;
  }
}

TEST_P(ScCpu, Float32EqualsReferenceFloat64) {
  const ModelFile file = ModelFile::load(GetParam().path);
  for (int t = 0; t < file.config().num_interactions; ++t) {
    const ScDescriptor d = build_sc_descriptor(file, t);
    const testing::ScInputs in = testing::random_sc_inputs(file, t, kAtoms, 300 + t);
    // Inputs rounded to float32 first, so the comparison sees only the executor's own round-off.
    const at::Tensor A = in.A.to(at::kFloat).to(at::kDouble).requires_grad_(true);
    const at::Tensor B = testing::reference_sc(file, t, A, in.species);
    const at::Tensor dB = at::randn_like(B.detach()).to(at::kFloat).to(at::kDouble);
    B.backward(dB);
    const at::Tensor dA = A.grad();
    EXPECT_TRUE(testing::all_close(executor_forward<float>(d, A.detach(), in.species), B.detach(), testing::kRelTolF32))
        << "layer " << t;
    EXPECT_TRUE(testing::all_close(executor_backward<float>(d, A.detach(), in.species, dB), dA, testing::kRelTolF32))
        << "layer " << t;
  }
}

// The loops of every instruction set this processor runs (core/cpu_isa.h) against the reference,
// float64 forward and backward, float32 forward; each is the one the dispatcher then uses.
TEST_P(ScCpu, EveryInstructionSetEqualsReference) {
  const ModelFile file = ModelFile::load(GetParam().path);
  testing::for_each_cpu_isa([&](CpuIsa isa) {
    ASSERT_EQ(cpu_isa(), isa);
    for (int t = 0; t < file.config().num_interactions; ++t) {
      const ScDescriptor d = build_sc_descriptor(file, t);
      const testing::ScInputs in = testing::random_sc_inputs(file, t, kAtoms, 400 + t);
      const at::Tensor A = in.A.to(at::kFloat).to(at::kDouble).requires_grad_(true);
      const at::Tensor B = testing::reference_sc(file, t, A, in.species);
      const at::Tensor dB = at::randn_like(B.detach());
      B.backward(dB);
      EXPECT_TRUE(testing::all_close(executor_forward<double>(d, A.detach(), in.species), B.detach(),
                                     testing::kRelTolF64))
          << "layer " << t;
      EXPECT_TRUE(testing::all_close(executor_backward<double>(d, A.detach(), in.species, dB), A.grad(),
                                     testing::kRelTolF64))
          << "layer " << t;
      EXPECT_TRUE(testing::all_close(executor_forward<float>(d, A.detach(), in.species), B.detach(),
                                     testing::kRelTolF32))
          << "layer " << t;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Models, ScCpu, ::testing::ValuesIn(testing::sc_test_models()),
                         [](const auto& info) {
                           std::string s = info.param.name;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// Callers split atoms over threads by offsetting the pointers; any split gives the same bytes.
TEST(ScCpu, ChunkedEqualsUnchunked) {
  const ModelFile file = ModelFile::load(testing::sc_model("sc-corr3-l2"));
  const ScDescriptor d = build_sc_descriptor(file, 0);
  const testing::ScInputs in = testing::random_sc_inputs(file, 0, kAtoms, 9);
  const at::Tensor dB = at::randn({kAtoms, d.out_dim}, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor B_all = executor_forward<double>(d, in.A, in.species);
  const at::Tensor dA_all = executor_backward<double>(d, in.A, in.species, dB);
  const ScCpuExecutor<double> ex(d);
  const int64_t C = d.channels, K = d.num_components;
  const at::Tensor a = testing::executor_layout(d, in.A).contiguous();
  for (const int64_t chunk : {int64_t{1}, int64_t{7}, kAtoms}) {
    at::Tensor B = at::empty_like(B_all), dA = at::empty_like(a);
    for (int64_t i = 0; i < kAtoms; i += chunk) {
      const int64_t n = std::min(chunk, kAtoms - i);
      ex.forward(a.data_ptr<double>() + i * C * K, in.species.data_ptr<int64_t>() + i, n,
                 B.data_ptr<double>() + i * d.out_dim);
      ex.backward(a.data_ptr<double>() + i * C * K, in.species.data_ptr<int64_t>() + i,
                  dB.data_ptr<double>() + i * d.out_dim, n, dA.data_ptr<double>() + i * C * K);
    }
    EXPECT_TRUE(at::equal(B, B_all)) << "chunk " << chunk;
    EXPECT_TRUE(at::equal(testing::reference_layout(d, dA), dA_all)) << "chunk " << chunk;
  }
}

// MACE's U stacks every coupling tree, many linearly dependent; the rank per order of MP-0
// medium's layer 0 (0e: 1, 4, 8 of 1, 4, 23 paths; 1o: 1, 3, 12 of 1, 6, 51) was checked
// independently by Gaussian elimination on the merged coefficients.
TEST(ScDescriptor, PathReductionKeepsOneBasisPathPerRank) {
  const ModelFile file = ModelFile::load(testing::sc_model("mp0-medium"));
  const ScDescriptor full = build_sc_descriptor(file, 0, {false}), reduced = build_sc_descriptor(file, 0);
  ASSERT_EQ(reduced.blocks.size(), 2u);
  EXPECT_EQ(reduced.blocks[0].num_paths, (std::vector<int>{1, 4, 8}));
  EXPECT_EQ(reduced.blocks[0].source_paths, (std::vector<int>{1, 4, 23}));
  EXPECT_EQ(reduced.blocks[1].num_paths, (std::vector<int>{1, 3, 12}));
  EXPECT_EQ(full.blocks[1].num_paths, (std::vector<int>{1, 6, 51}));
  EXPECT_LT(reduced.num_terms() * 3, full.num_terms());
}

// float32 model files: U is known to ~6e-8, so the reduced descriptor agrees with the reference to
// float32 precision, the unreduced one to float64 round-off.
TEST(ScDescriptor, Float32FilesReduceToFloat32Precision) {
  for (const char* name : {"small_l1_f32", "large_l2_f32"}) {
    const ModelFile file = ModelFile::load(testing::exported_model(name));
    for (int t = 0; t < file.config().num_interactions; ++t) {
      const testing::ScInputs in = testing::random_sc_inputs(file, t, kAtoms, 400 + t);
      const at::Tensor want = testing::reference_sc(file, t, in.A, in.species);
      const ScDescriptor reduced = build_sc_descriptor(file, t), full = build_sc_descriptor(file, t, {false});
      EXPECT_LT(reduced.num_terms(), full.num_terms()) << name;
      EXPECT_TRUE(testing::all_close(executor_forward<double>(reduced, in.A, in.species), want, testing::kRelTolF32))
          << name << " layer " << t;
      EXPECT_TRUE(testing::all_close(executor_forward<double>(full, in.A, in.species), want, testing::kRelTolF64))
          << name << " layer " << t;
    }
  }
}

TEST(ScCpuErrors, SpeciesOutOfRangeNamesTheAtom) {
  const ModelFile file = ModelFile::load(testing::exported_model("small_l1"));
  const ScDescriptor d = build_sc_descriptor(file, 0);
  testing::ScInputs in = testing::random_sc_inputs(file, 0, 3, 1);
  in.species[2] = d.num_elements;
  const std::string msg = testing::error_of([&] { executor_forward<double>(d, in.A, in.species); });
  EXPECT_NE(msg.find("atom 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 elements"), std::string::npos) << msg;
}

TEST(ScCpuErrors, MissingLayerIsNamed) {
  const ModelFile file = ModelFile::load(testing::exported_model("small_l1"));
  const std::string msg = testing::error_of([&] { build_sc_descriptor(file, 2); });
  EXPECT_NE(msg.find("no product layer 2"), std::string::npos) << msg;
}

}  // namespace
}  // namespace flashmace
