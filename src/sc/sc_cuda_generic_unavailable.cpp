// Built instead of sc_cuda_generic.cu when CMake found no CUDA toolkit.
#include "sc/sc_cuda_executor.h"

namespace flashmace {

template <typename T>
std::unique_ptr<ScCudaExecutor<T>> make_generic_cuda_sc(const ScDescriptor&, std::string* why_not) {
  *why_not = "flashmace was built without the CUDA toolkit, so it has no generic CUDA SC executor";
  return nullptr;
}

template std::unique_ptr<ScCudaExecutor<float>> make_generic_cuda_sc<float>(const ScDescriptor&, std::string*);
template std::unique_ptr<ScCudaExecutor<double>> make_generic_cuda_sc<double>(const ScDescriptor&, std::string*);

}  // namespace flashmace
