#pragma once
// A second CUDA stream for step work that does not depend on what the main stream is computing
// (the radial MLPs of later layers need only the edge vectors). Small systems leave most of the
// H200's SMs idle between latency-bound kernels; work queued beside them fills the gaps. Inside a
// CUDA-graph capture the fork and join become branches of the graph. Internal to the fast engine;
// the CUDA types stay in the .cpp. On a CPU device, or without CUDA, it is inactive.
#include <ATen/ATen.h>

#include <functional>
#include <memory>

namespace flashmace {

class SideStream {
 public:
  explicit SideStream(c10::Device device);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  bool active() const { return impl_ != nullptr; }
  // Queues `work` on the side stream, after everything queued on the current stream so far.
  void run(const std::function<void()>& work);
  // The current stream waits for everything run() queued since the last join() (if anything).
  // Every run() must be joined before a CUDA-graph capture segment ends.
  void join();
  // `t` is used on both streams (the side stream and the one that queued the last run()): the caching allocator must not hand its memory to either stream's
  // next allocation before both streams are past their uses.
  void share(const at::Tensor& t) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashmace
