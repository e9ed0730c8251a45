#include "engine/evaluation_trace.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdlib>
#include <iostream>
#include <set>

#include "core/error.h"

namespace flashmace {

namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> activities(bool cuda) {
  if (cuda) return {ActivityType::CPU, ActivityType::CUDA};
  return {ActivityType::CPU};
}

int64_t positive_number(const std::string& text, const std::string& what, const std::string& value) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < 1)
    throw Error("FLASHMACE_TRACE=" + value + ": " + what + " must be a positive integer (FILE[:FIRST[:COUNT]])");
  return n;
}

}  // namespace

std::unique_ptr<EvaluationTrace> EvaluationTrace::from_environment(bool cuda) {
  const char* env = std::getenv("FLASHMACE_TRACE");
  if (!env || !*env) return nullptr;
  const std::string value(env);
  // FILE may hold ':' only if FIRST and COUNT follow: split from the right.
  std::string path = value;
  int64_t first = 20, count = 5;
  std::size_t cut = path.rfind(':');
  if (cut != std::string::npos) {
    const std::string tail = path.substr(cut + 1);
    path = path.substr(0, cut);
    const std::size_t second = path.rfind(':');
    if (second != std::string::npos) {
      first = positive_number(path.substr(second + 1), "FIRST", value);
      count = positive_number(tail, "COUNT", value);
      path = path.substr(0, second);
    } else {
      first = positive_number(tail, "FIRST", value);
    }
  }
  if (path.empty()) throw Error("FLASHMACE_TRACE=" + value + ": no file name (FILE[:FIRST[:COUNT]])");
  return std::make_unique<EvaluationTrace>(path, first, count, cuda);
}

EvaluationTrace::EvaluationTrace(std::string path, int64_t first, int64_t count, bool cuda)
    : path_(std::move(path)), first_(first), count_(count), cuda_(cuda) {}

EvaluationTrace::~EvaluationTrace() {
  if (recording_) kineto::disableProfiler();  // (a run shorter than FIRST + COUNT - 1: nothing written)
}

void EvaluationTrace::before(int64_t number) {
  if (written_ || recording_ || number != first_) return;
  // Without a GPU, Kineto's start-up logs a failed device query as an ERROR line (which LAMMPS
  // users and scripts take for an error): quiet its log unless the caller set a level.
  if (!cuda_) setenv("KINETO_LOG_LEVEL", "5", 0);
  const ProfilerConfig config(ProfilerState::KINETO);
  kineto::prepareProfiler(config, activities(cuda_));
  kineto::enableProfiler(config, activities(cuda_));
  recording_ = true;
}

void EvaluationTrace::after(int64_t number, const std::function<void()>& synchronize) {
  if (!recording_ || number < first_ + count_ - 1) return;
  synchronize();
  kineto::disableProfiler()->save(path_);
  recording_ = false;
  written_ = true;
  std::cerr << "flashmace: trace of evaluations " << first_ << "-" << number << " written to " << path_ << "\n";
}

}  // namespace flashmace
