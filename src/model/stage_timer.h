#pragma once
// Wall-clock time per stage of an evaluation, for the benchmark's breakdown. lap(stage) charges the
// time since the previous lap to `stage`; the sync callback (a device synchronisation on GPUs) runs
// first so that asynchronous work is charged to the stage that queued it. Timing costs those syncs,
// so the benchmark measures steps without a timer and the breakdown in separate steps. An optional
// probe is read at every lap (after the sync) and its largest reading kept per stage: the benchmark's
// probe returns the device memory's peak since the previous reading, so each stage gets its peak.
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <string>

namespace flashmace {

class StageTimer {
 public:
  explicit StageTimer(std::function<void()> sync = {}) : sync_(std::move(sync)) {}
  void set_probe(std::function<double()> probe) { probe_ = std::move(probe); }
  void start() {
    if (sync_) sync_();
    if (probe_) probe_();  // (starts the probe's window)
    last_ = std::chrono::steady_clock::now();
  }
  void lap(const std::string& stage) {
    if (sync_) sync_();
    const auto now = std::chrono::steady_clock::now();
    seconds_[stage] += std::chrono::duration<double>(now - last_).count();
    if (probe_) {
      const double v = probe_();
      double& most = maxima_.try_emplace(stage, v).first->second;
      most = std::max(most, v);
    }
    last_ = now;
  }
  const std::map<std::string, double>& seconds() const { return seconds_; }
  const std::map<std::string, double>& maxima() const { return maxima_; }
  void reset() {
    seconds_.clear();
    maxima_.clear();
  }

 private:
  std::function<void()> sync_;
  std::function<double()> probe_;
  std::map<std::string, double> maxima_;
  std::chrono::steady_clock::time_point last_;
  std::map<std::string, double> seconds_;
};

}  // namespace flashmace
