// The code generator is deterministic, NVRTC compiles its output for the H200 (sm_90) without a
// GPU, and the disk cache returns only entries that match in every respect; NVRTC trouble is
// reported (once) instead of thrown, so callers fall back to the generic executor.
#include <gtest/gtest.h>

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "core/model_file.h"
#include "sc/sc_codegen.h"
#include "sc/sc_descriptor.h"
#include "jit/nvrtc.h"
#include "sc_test_support.h"
#include "test_support.h"

namespace flashmace {
namespace {

using testing::ScModel;

// POSIX, not std::filesystem: LibTorch exports std::filesystem symbols of its own libstdc++ build
// that crash when our objects call them.
bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}
void remove_tree(const std::string& p) {
  nftw(p.c_str(), [](const char* f, const struct stat*, int, struct FTW*) { return ::remove(f); }, 16, FTW_DEPTH | FTW_PHYS);
}
int count_entries(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
    closedir(d);
  }
  return n;
}

constexpr const char* kArch = "sm_90";
const JitUse kScJit{"the SC kernels", "the symmetric contraction runs on the generic executor"};

// A fresh cache directory per test, removed afterwards; FLASHMACE_SC_CACHE points at it.
class ScCacheDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = "/tmp/flashmace_sc_" + std::to_string(getpid()) + "_" + info->name();
    remove_tree(dir_);
    setenv("FLASHMACE_SC_CACHE", dir_.c_str(), 1);
    unsetenv("FLASHMACE_NVRTC_LIBRARY");
  }
  void TearDown() override {
    remove_tree(dir_);
    unsetenv("FLASHMACE_SC_CACHE");
    unsetenv("FLASHMACE_NVRTC_LIBRARY");
  }
  std::string dir_;
};

std::string small_source() {
  return generate_sc_cuda_source(build_sc_descriptor(ModelFile::load(testing::sc_model("tiny-cuni")), 0));
}

std::string read_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_bytes(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

TEST(ScCodegen, SameModelGivesSameSourceBytes) {
  for (const ScModel& m : testing::sc_test_models()) {
    const ModelFile f1 = ModelFile::load(m.path), f2 = ModelFile::load(m.path);
    for (int t = 0; t < f1.config().num_interactions; ++t) {
      const std::string a = generate_sc_cuda_source(build_sc_descriptor(f1, t));
      EXPECT_EQ(a, generate_sc_cuda_source(build_sc_descriptor(f2, t))) << m.name << " layer " << t;
      EXPECT_EQ(a.find_first_of("\r\t"), std::string::npos);
    }
  }
}

TEST(ScCodegen, DifferentWeightsOrLayersGiveDifferentSource) {
  const ModelFile f = ModelFile::load(testing::sc_model("mp0-medium"));
  EXPECT_NE(generate_sc_cuda_source(build_sc_descriptor(f, 0)), generate_sc_cuda_source(build_sc_descriptor(f, 1)));
}

TEST(ScCodegen, PackedWeightsPutBlocksSideBySide) {
  const ScDescriptor d = build_sc_descriptor(ModelFile::load(testing::exported_model("large_l2")), 0);
  const std::vector<double> w = pack_sc_weights<double>(d);
  const int PW = packed_weight_paths(d), C = d.channels;
  ASSERT_EQ(w.size(), static_cast<std::size_t>(d.num_elements) * PW * C);
  int offset = 0;
  for (const ScBlock& b : d.blocks) {
    for (int z = 0; z < d.num_elements; ++z)
      for (int p = 0; p < b.total_paths; ++p)
        for (int c = 0; c < C; ++c)
          ASSERT_EQ(w[(static_cast<std::size_t>(z) * PW + offset + p) * C + c], b.weights[(static_cast<std::size_t>(z) * b.total_paths + p) * C + c]);
    offset += b.total_paths;
  }
}

class ScNvrtc : public ScCacheDir, public ::testing::WithParamInterface<ScModel> {};

TEST_P(ScNvrtc, CompilesEveryLayerForSm90) {
  if (std::string why; !nvrtc_available(&why)) GTEST_SKIP() << why;
  const ModelFile file = ModelFile::load(GetParam().path);
  for (int t = 0; t < file.config().num_interactions; ++t) {
    const Cubin c = compile_cubin(generate_sc_cuda_source(build_sc_descriptor(file, t)), kArch, kScJit);
    ASSERT_TRUE(c) << "layer " << t << ": " << c.error;
    EXPECT_FALSE(c.from_cache);
    EXPECT_EQ(std::string(c.image.data(), 4), "\x7f" "ELF");
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ScNvrtc, ::testing::ValuesIn(testing::sc_test_models()), [](const auto& info) {
  std::string s = info.param.name;
  for (char& ch : s)
    if (ch == '-') ch = '_';
  return s;
});

TEST_F(ScCacheDir, SecondCompileIsACacheHitWithTheSameImage) {
  if (std::string why; !nvrtc_available(&why)) GTEST_SKIP() << why;
  const std::string src = small_source();
  const Cubin first = compile_cubin(src, kArch, kScJit);
  ASSERT_TRUE(first) << first.error;
  EXPECT_FALSE(first.from_cache);
  const std::string path = jit_cache_path(src, kArch);
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path.rfind(dir_ + "/", 0), 0u) << path;
  EXPECT_TRUE(exists(path));
  const Cubin second = compile_cubin(src, kArch, kScJit);
  ASSERT_TRUE(second) << second.error;
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.image, first.image);
  // Another architecture is another entry.
  EXPECT_NE(jit_cache_path(src, "sm_80"), path);
}

TEST_F(ScCacheDir, DamagedOrStaleEntriesAreRecompiledNeverUsed) {
  if (std::string why; !nvrtc_available(&why)) GTEST_SKIP() << why;
  const std::string src = small_source();
  const Cubin good = compile_cubin(src, kArch, kScJit);
  ASSERT_TRUE(good) << good.error;
  const std::string path = jit_cache_path(src, kArch);
  const std::string intact = read_bytes(path);
  const std::size_t eol = intact.find('\n');

  std::string flipped = intact;
  flipped[flipped.size() - 100] ^= 0x5a;  // a byte of the CUBIN: the checksum no longer matches
  std::string stale = intact;              // same file from another NVRTC version
  stale.replace(stale.find(" nvrtc="), 7, " nvrtc=0.0-");
  std::string other_source = intact;       // same key, different source (a hash collision)
  other_source[eol + 10] ^= 0x01;
  const std::vector<std::pair<std::string, std::string>> damaged = {
      {"truncated", intact.substr(0, intact.size() / 2)},
      {"empty", ""},
      {"flipped byte", flipped},
      {"stale NVRTC version", stale},
      {"other source", other_source},
      {"garbage", std::string(4096, '\x7f')}};
  for (const auto& [what, bytes] : damaged) {
    write_bytes(path, bytes);
    const Cubin c = compile_cubin(src, kArch, kScJit);
    ASSERT_TRUE(c) << what << ": " << c.error;
    EXPECT_FALSE(c.from_cache) << what;
    EXPECT_EQ(c.image, good.image) << what;
    EXPECT_EQ(read_bytes(path), intact) << what << ": the entry is rewritten";
    EXPECT_TRUE(compile_cubin(src, kArch, kScJit).from_cache) << what;
  }
}

TEST_F(ScCacheDir, UnwritableCacheStillCompiles) {
  if (std::string why; !nvrtc_available(&why)) GTEST_SKIP() << why;
  write_bytes(dir_ + ".file", "not a directory");
  setenv("FLASHMACE_SC_CACHE", (dir_ + ".file/sub").c_str(), 1);
  const Cubin c = compile_cubin(small_source(), kArch, kScJit);
  EXPECT_TRUE(c) << c.error;
  EXPECT_FALSE(c.from_cache);
  ::remove((dir_ + ".file").c_str());
}

TEST_F(ScCacheDir, MissingNvrtcIsReportedOnceNotThrown) {
  setenv("FLASHMACE_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so", 1);
  std::string why;
  EXPECT_FALSE(nvrtc_available(&why));
  EXPECT_NE(why.find("NVRTC not found"), std::string::npos) << why;
  ::testing::internal::CaptureStderr();
  const Cubin a = compile_cubin(small_source(), kArch, kScJit);
  const Cubin b = compile_cubin(small_source(), kArch, kScJit);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(a);
  EXPECT_FALSE(b);
  EXPECT_NE(a.error.find("/nonexistent/libnvrtc.so"), std::string::npos) << a.error;
  EXPECT_NE(log.find("generic executor"), std::string::npos) << log;
  EXPECT_EQ(log.find("flashmace:"), log.rfind("flashmace:")) << "logged more than once:\n" << log;
  EXPECT_EQ(count_entries(dir_), 0);
}

TEST_F(ScCacheDir, CompileErrorIsReportedOnceAndNotCached) {
  if (std::string why; !nvrtc_available(&why)) GTEST_SKIP() << why;
  const std::string broken = small_source() + "\nthis is not C++;\n";
  ::testing::internal::CaptureStderr();
  const Cubin a = compile_cubin(broken, kArch, kScJit);
  const Cubin b = compile_cubin(broken, kArch, kScJit);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(a);
  EXPECT_FALSE(b);
  EXPECT_NE(a.error.find("failed to compile"), std::string::npos) << a.error;
  EXPECT_NE(a.error.find("error"), std::string::npos) << "the NVRTC log is included: " << a.error;
  EXPECT_EQ(log.find("flashmace:"), log.rfind("flashmace:")) << "logged more than once:\n" << log;
  EXPECT_EQ(count_entries(dir_), 0) << "nothing cached";
}

TEST_F(ScCacheDir, UnknownArchitectureFailsCleanly) {
  if (std::string why; !nvrtc_available(&why)) GTEST_SKIP() << why;
  const Cubin c = compile_cubin(small_source(), "sm_1", kScJit);
  EXPECT_FALSE(c);
  EXPECT_FALSE(c.error.empty());
}

}  // namespace
}  // namespace flashmace
