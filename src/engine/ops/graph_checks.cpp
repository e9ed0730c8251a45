#include "engine/ops/graph_checks.h"

#include "core/error.h"
#include "engine/kernels/graph_checks_kernels.h"

#if FLASHMACE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmace {

namespace {

#if FLASHMACE_CUDA_KERNELS
void* stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
#endif

}  // namespace

bool all_equal(const std::vector<std::pair<at::Tensor, at::Tensor>>& pairs) {
  if (pairs.size() > static_cast<std::size_t>(kMaxEqualityRanges))
    throw Error("all_equal: at most " + std::to_string(kMaxEqualityRanges) + " pairs of tensors");
  for (const auto& [a, b] : pairs)
    if (!a.sizes().equals(b.sizes())) return false;
#if FLASHMACE_CUDA_KERNELS
  if (!pairs.empty() && pairs.front().first.is_cuda()) {
    std::vector<at::Tensor> keep;  // contiguous copies live until the check has run
    EqualityRanges r;
    for (const auto& [a, b] : pairs) {
      keep.push_back(a.contiguous());
      keep.push_back(b.contiguous());
      r.a[r.count] = keep[keep.size() - 2].data_ptr<int64_t>();
      r.b[r.count] = keep.back().data_ptr<int64_t>();
      r.n[r.count] = a.numel();
      ++r.count;
    }
    const c10::cuda::CUDAGuard guard(keep.front().device());
    at::Tensor flag = at::ones({1}, keep.front().options().dtype(at::kInt));
    check_equal_cuda(r, flag.data_ptr<int>(), stream_of(flag));
    return flag.item<int>() != 0;
  }
#endif
  for (const auto& [a, b] : pairs)
    if (!at::equal(a, b)) return false;
  return true;
}

bool all_negated(const std::vector<NegatedPairs>& sets) {
  if (sets.empty()) return true;
#if FLASHMACE_CUDA_KERNELS
  if (sets.front().vectors.is_cuda()) {
    const c10::cuda::CUDAGuard guard(sets.front().vectors.device());
    at::Tensor flag = at::ones({1}, sets.front().a.options().dtype(at::kInt));
    std::vector<at::Tensor> keep;  // contiguous copies live until the checks have run
    for (const NegatedPairs& s : sets) {
      keep.insert(keep.end(), {s.vectors.contiguous(), s.a.contiguous(), s.b.contiguous()});
      const at::Tensor* t = &keep[keep.size() - 3];
      check_negated_cuda(t[0].data_ptr<double>(), t[1].data_ptr<int64_t>(), t[2].data_ptr<int64_t>(), t[1].numel(),
                         flag.data_ptr<int>(), stream_of(flag));
    }
    return flag.item<int>() != 0;
  }
#endif
  at::Tensor ok = at::ones({}, sets.front().a.options().dtype(at::kBool));
  for (const NegatedPairs& s : sets) {
    const at::Tensor paired = at::nonzero(s.b >= 0).squeeze(1);
    const at::Tensor x = s.vectors.index_select(0, s.a.index_select(0, paired));
    const at::Tensor y = s.vectors.index_select(0, s.b.index_select(0, paired));
    ok = ok & (x == -y).all();
  }
  return ok.item<bool>();
}

}  // namespace flashmace
