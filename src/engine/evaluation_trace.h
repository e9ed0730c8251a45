// A timeline of a few evaluations, for finding where a step's time goes outside the engine's own
// stages (the stage timer sees only those): FLASHMACE_TRACE=FILE[:FIRST[:COUNT]] records, from the
// evaluator's evaluation FIRST (1-based, default 20) for COUNT evaluations (default 5), LibTorch's
// Kineto profile of the whole process: ATen operators on the host, and through CUPTI every kernel,
// copy, fill and CUDA runtime call on the device, a Kokkos LAMMPS's own included. Each evaluation is
// marked "flashmace::evaluate". The Chrome trace goes to FILE (bench/trace_summary.py reads it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace flashmace {

class EvaluationTrace {
 public:
  // Null when FLASHMACE_TRACE is unset or empty; throws Error on a malformed value. `cuda`: also
  // record the device (an evaluator on a GPU; on a machine without one CUPTI only complains).
  static std::unique_ptr<EvaluationTrace> from_environment(bool cuda);
  EvaluationTrace(std::string path, int64_t first, int64_t count, bool cuda);
  ~EvaluationTrace();
  EvaluationTrace(const EvaluationTrace&) = delete;
  EvaluationTrace& operator=(const EvaluationTrace&) = delete;

  // Around evaluation `number` (1-based). after() writes the file once the last one has run;
  // `synchronize` waits for the device, so that its work is in the profile.
  void before(int64_t number);
  void after(int64_t number, const std::function<void()>& synchronize);

 private:
  std::string path_;
  int64_t first_, count_;
  bool cuda_;
  bool recording_ = false, written_ = false;
};

}  // namespace flashmace
