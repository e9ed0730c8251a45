#include "engine/step/side_stream.h"

#include "core/error.h"

#ifdef FLASHMACE_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "engine/step/stream_order.h"
#endif

namespace flashmace {

#ifdef FLASHMACE_TORCH_CUDA

struct SideStream::Impl {
  c10::DeviceIndex device;
  cudaStream_t raw = nullptr;  // owned: a stream of LibTorch's pool may be the caller's own
  c10::cuda::CUDAStream side;
  c10::cuda::CUDAStream main;  // the stream that queued the last run()
  bool pending = false;        // work queued by run() since the last join()
  Impl(c10::DeviceIndex device, cudaStream_t raw)
      : device(device),
        raw(raw),
        side(c10::cuda::getStreamFromExternal(raw, device)),
        main(c10::cuda::getCurrentCUDAStream(device)) {}
  ~Impl() { cudaStreamDestroy(raw); }
};

SideStream::SideStream(c10::Device device) {
  if (!device.is_cuda()) return;
  const c10::cuda::CUDAGuard guard(device);
  cudaStream_t raw = nullptr;
  const cudaError_t status = cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking);
  if (status != cudaSuccess)
    throw Error(std::string("side stream: cudaStreamCreateWithFlags failed: ") + cudaGetErrorString(status));
  impl_ = std::make_unique<Impl>(device.index(), raw);
}

SideStream::~SideStream() = default;

void SideStream::run(const std::function<void()>& work) {
  if (!impl_) {
    work();
    return;
  }
  impl_->main = c10::cuda::getCurrentCUDAStream(impl_->device);
  impl_->pending = true;
  order_after(impl_->main, impl_->side);
  const c10::cuda::CUDAStreamGuard guard(impl_->side);
  work();
}

void SideStream::join() {
  // (Nothing to wait for otherwise; inside a capture, waiting on a side stream that has not joined
  // it since the last segment began is an error.)
  if (!impl_ || !impl_->pending) return;
  order_after(impl_->side, c10::cuda::getCurrentCUDAStream(impl_->device));
  impl_->pending = false;
}

void SideStream::share(const at::Tensor& t) const {
  if (!impl_ || !t.defined() || !t.is_cuda() || !t.storage().data_ptr().get()) return;
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), impl_->side);
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), impl_->main);
}

#else

struct SideStream::Impl {};

SideStream::SideStream(c10::Device) {}
SideStream::~SideStream() = default;
void SideStream::run(const std::function<void()>& work) { work(); }
void SideStream::join() {}
void SideStream::share(const at::Tensor&) const {}

#endif

}  // namespace flashmace
