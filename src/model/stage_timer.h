#pragma once
// Wall-clock time per stage of an evaluation, for the benchmark's breakdown. lap(stage) charges the
// time since the previous lap to `stage`; the sync callback (a device synchronisation on GPUs) runs
// first so that asynchronous work is charged to the stage that queued it. Timing costs those syncs,
// so the benchmark measures steps without a timer and the breakdown in separate steps.
#include <chrono>
#include <functional>
#include <map>
#include <string>

namespace flashmace {

class StageTimer {
 public:
  explicit StageTimer(std::function<void()> sync = {}) : sync_(std::move(sync)) {}
  void start() {
    if (sync_) sync_();
    last_ = std::chrono::steady_clock::now();
  }
  void lap(const std::string& stage) {
    if (sync_) sync_();
    const auto now = std::chrono::steady_clock::now();
    seconds_[stage] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  const std::map<std::string, double>& seconds() const { return seconds_; }
  void reset() { seconds_.clear(); }

 private:
  std::function<void()> sync_;
  std::chrono::steady_clock::time_point last_;
  std::map<std::string, double> seconds_;
};

}  // namespace flashmace
