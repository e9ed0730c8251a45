#pragma once
// Ordering between two CUDA streams (LibTorch's types): include only where FLASHMACE_TORCH_CUDA is
// defined. Internal to the fast engine.
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

namespace flashmace {

// `to` waits for the work queued on `from` so far (an event, no host wait). Inside a CUDA-graph
// capture this is a fork or a join of the graph.
inline void order_after(const c10::cuda::CUDAStream& from, const c10::cuda::CUDAStream& to) {
  at::cuda::CUDAEvent done;
  done.record(from);
  done.block(to);
}

}  // namespace flashmace
