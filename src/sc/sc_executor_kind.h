#pragma once
// Which symmetric-contraction executor to use on a GPU (sc_cuda_executor.h): the specialised one
// when it can be made, else the generic one (Auto), or exactly one of them.
namespace flashmace {

enum class ScExecutorKind { Auto, Specialized, Generic };

}  // namespace flashmace
