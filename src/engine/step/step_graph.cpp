#include "engine/step/step_graph.h"

#include <vector>

#include "core/error.h"

#ifdef FLASHMACE_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "engine/step/stream_order.h"
#endif

namespace flashmace {

#ifdef FLASHMACE_TORCH_CUDA

struct SegmentedCudaGraph::Impl {
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> segments;
  std::vector<HostWork> between;  // between[i] runs after segments[i]
};

bool SegmentedCudaGraph::available() { return true; }

SegmentedCudaGraph::SegmentedCudaGraph(c10::Device device, const Body& warm_up, const Body& capture,
                                       bool high_priority)
    : impl_(std::make_unique<Impl>()) {
  if (!device.is_cuda()) throw Error("CUDA graph: the device is " + device.str() + ", not a CUDA device");
  const c10::cuda::CUDAGuard device_guard(device);
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(device.index());
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(high_priority, device.index());
  order_after(caller, side);
  {
    const c10::cuda::CUDAStreamGuard stream_guard(side);
    warm_up([](const HostWork& work) { work(); });
    Impl& s = *impl_;
    auto begin = [&s] {
      s.segments.push_back(std::make_unique<at::cuda::CUDAGraph>());
      const at::cuda::MempoolId_t pool = s.segments.size() > 1 ? s.segments.front()->pool() : at::cuda::MempoolId_t{0, 0};
      // Thread-local: other host threads (OpenMP in the caller) may keep using CUDA meanwhile.
      s.segments.back()->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
    };
    begin();
    capture([&s, &begin](HostWork work) {
      s.segments.back()->capture_end();
      s.between.push_back(std::move(work));
      begin();
    });
    s.segments.back()->capture_end();
  }
  order_after(side, caller);
}

SegmentedCudaGraph::~SegmentedCudaGraph() = default;

void SegmentedCudaGraph::replay() {
  for (std::size_t i = 0; i < impl_->segments.size(); ++i) {
    impl_->segments[i]->replay();
    if (i < impl_->between.size()) impl_->between[i]();
  }
}

int SegmentedCudaGraph::segments() const { return static_cast<int>(impl_->segments.size()); }

#else

struct SegmentedCudaGraph::Impl {};

bool SegmentedCudaGraph::available() { return false; }

SegmentedCudaGraph::SegmentedCudaGraph(c10::Device, const Body&, const Body&, bool) {
  throw Error("CUDA graph: this build's LibTorch has no CUDA");
}

SegmentedCudaGraph::~SegmentedCudaGraph() = default;

void SegmentedCudaGraph::replay() {}

int SegmentedCudaGraph::segments() const { return 0; }

#endif

}  // namespace flashmace
