#pragma once
// A CUDA graph of one engine step (DESIGN.md: small systems are dominated by launch overhead).
// The step is captured in segments: host work that cannot be captured (the halo exchanges, staged
// through host memory, and the exchanger's MPI calls) runs between them at every replay. All segments
// share one private memory pool, so the tensors a step leaves (its outputs, the features an exchange
// reads) keep their addresses from replay to replay. Internal header of the fast engine; the
// CUDA-specific types stay in the .cpp.
#include <c10/core/Device.h>

#include <functional>
#include <memory>

namespace flashmace {

class SegmentedCudaGraph {
 public:
  using HostWork = std::function<void()>;
  using Cut = std::function<void(HostWork)>;  // ends a segment: `work` runs on the host before the next
  using Body = std::function<void(const Cut&)>;

  // Whether LibTorch was built with CUDA (graphs can be captured at all).
  static bool available();

  // Runs warm_up eagerly on a side stream (cuBLAS workspaces and lazily loaded kernels come to exist
  // outside the capture; cuts run their work at once), then captures `capture` there. Later work on
  // the caller's stream is ordered after the warm-up. high_priority: capture on a stream of high
  // priority, so that its kernels keep their place on the SMs when work forked from it onto a
  // stream of normal priority (side_stream.h) could take them.
  SegmentedCudaGraph(c10::Device device, const Body& warm_up, const Body& capture, bool high_priority = false);
  ~SegmentedCudaGraph();
  SegmentedCudaGraph(const SegmentedCudaGraph&) = delete;
  SegmentedCudaGraph& operator=(const SegmentedCudaGraph&) = delete;

  // Launches the segments on the caller's current stream, with the host work between them.
  void replay();
  int segments() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashmace
