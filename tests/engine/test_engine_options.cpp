// The engine's options (engine/engine_options.h): one parser for every front end (pair style
// keywords, command-line flags), each key's accepted values and its message for the rest, and the
// checks make_evaluator runs once on the combination.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/model_file.h"
#include "engine/evaluator.h"
#include "test_support.h"

namespace flashmace {
namespace {

std::string refusal(const std::string& key, const std::string& value) {
  EngineOptions o;
  try {
    set_engine_option(o, key, value);
  } catch (const OptionError& e) {
    return e.what();
  }
  return "";
}

TEST(EngineOptions, EveryKeySetsItsField) {
  EngineOptions o;
  const std::pair<const char*, const char*> settings[] = {
      {"device", "cuda:1"}, {"dtype", "float32"},  {"head", "pt_head"},       {"path", "reference"},
      {"charge", "-2"},     {"spin", "3"},         {"elec_temp", "0.25"},
      {"edge_chunk", "4096"},
      {"atom_chunk", "512"}, {"memory", "2.5"},    {"sc", "generic"},         {"tf32", "yes"},
      {"reassociate", "off"}, {"radial", "spline"},   {"radial_intervals", "256"},
      {"radial_pairs", "off"}, {"atom_order", "input"}, {"cuda_graph", "off"}, {"side_stream", "off"}};
  for (const auto& [key, value] : settings) EXPECT_TRUE(set_engine_option(o, key, value)) << key;
  EXPECT_EQ(o.device, "cuda:1");
  EXPECT_EQ(o.dtype, Dtype::Float32);
  EXPECT_EQ(o.head, "pt_head");
  EXPECT_EQ(o.system, (std::map<std::string, double>{{"total_charge", -2.0}, {"total_spin", 3.0}, {"elec_temp", 0.25}}));
  EXPECT_EQ(o.path, EvaluationPath::Reference);
  EXPECT_EQ(o.edge_chunk, 4096);
  EXPECT_EQ(o.atom_chunk, 512);
  EXPECT_DOUBLE_EQ(o.memory_bytes, 2.5e9);
  EXPECT_EQ(o.sc, ScExecutorKind::Generic);
  EXPECT_EQ(o.tf32, Choice::On);
  EXPECT_EQ(o.reassociate, Choice::Off);
  EXPECT_EQ(o.radial, RadialMode::Spline);
  EXPECT_EQ(o.radial_intervals, 256);
  EXPECT_EQ(o.radial_pairs, Choice::Off);
  EXPECT_EQ(o.atom_order, Choice::Off);
  EXPECT_FALSE(o.cuda_graph);
  EXPECT_FALSE(o.side_stream);
  // every key listed is one the parser knows, and nothing else is
  EXPECT_EQ(engine_option_keys().size(), std::size(settings));
  for (const std::string& key : engine_option_keys()) EXPECT_NE(refusal(key, "?bad?"), "") << key;
  EXPECT_FALSE(set_engine_option(o, "exchange", "on"));
}

TEST(EngineOptions, RefusalsNameTheKeyTheValueAndWhatItAccepts) {
  EXPECT_EQ(refusal("device", "tpu"), "device tpu: use cpu, cuda or cuda:N");
  EXPECT_EQ(refusal("device", "cuda:abc"), "device cuda:abc: use cpu, cuda or cuda:N");
  EXPECT_EQ(refusal("device", "cuda:"), "device cuda:: use cpu, cuda or cuda:N");
  EXPECT_EQ(refusal("dtype", "float16"), "dtype float16: use float32 or float64");
  EXPECT_EQ(refusal("charge", "1e"), "charge 1e: the structure's total charge (a number)");
  EXPECT_EQ(refusal("spin", "nan"), "spin nan: the structure's total spin (a number)");
  EXPECT_EQ(refusal("path", "quick"), "path quick: use fast or reference");
  EXPECT_EQ(refusal("edge_chunk", "-5"), "edge_chunk -5: use 0 (automatic) or more");
  EXPECT_EQ(refusal("edge_chunk", "12abc"), "edge_chunk 12abc: use 0 (automatic) or more");
  EXPECT_EQ(refusal("memory", "-1"), "memory -1: a budget in GB, 0 = default");
  EXPECT_EQ(refusal("radial", "mlp"), "radial mlp: use exact or spline");
  EXPECT_EQ(refusal("reassociate", "yes"), "reassociate yes: use auto, on or off");
  EXPECT_EQ(refusal("radial_intervals", "8"), "radial_intervals 8: use 0 (automatic) or 16 to 4096");
  EXPECT_EQ(refusal("memory", "nan"), "memory nan: a budget in GB, 0 = default");
  EXPECT_EQ(refusal("sc", "fastest"), "sc fastest: use auto, specialized or generic");
  EXPECT_EQ(refusal("tf32", "on"), "tf32 on: use auto, yes or no");
  EXPECT_EQ(refusal("radial_pairs", "sometimes"), "radial_pairs sometimes: use auto, on or off");
  EXPECT_EQ(refusal("atom_order", "off"), "atom_order off: use auto or input");
  EXPECT_EQ(refusal("cuda_graph", "yes"), "cuda_graph yes: use on or off");
}

TEST(EngineOptions, CombinationsAreCheckedOnceWhenTheEvaluatorIsMade) {
  const ModelFile file = ModelFile::load(testing::exported_model("small_l1"));
  EngineOptions o;
  o.tf32 = Choice::On;  // on the CPU, in the model's float64
  EXPECT_NE(testing::error_of([&] { make_evaluator(file, o); })
                .find("tf32 yes needs dtype float32 on a CUDA device (it lets the radial-MLP GEMMs use TF32 tensor "
                      "cores); this evaluator is float64 on cpu"),
            std::string::npos);
  o = EngineOptions();
  o.device_sharers = 0;
  EXPECT_NE(testing::error_of([&] { make_evaluator(file, o); }).find("device_sharers must be at least 1"),
            std::string::npos);
  o = EngineOptions();
  EXPECT_EQ(resolved_dtype(o, file.config().dtype), "float64");
  o.dtype = Dtype::Float32;
  EXPECT_EQ(make_evaluator(file, o)->dtype(), "float32");
}

TEST(EngineOptions, SharersSplitTheDefaultBudget) {
  EXPECT_DOUBLE_EQ(default_memory_budget("cpu", 4), default_memory_budget("cpu") / 4);
}

}  // namespace
}  // namespace flashmace
