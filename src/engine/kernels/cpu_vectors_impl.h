#pragma once
// The vector types and unaligned loads/stores of the CPU kernels built once per instruction set
// (conv_tp_cpu_rows_impl.h, species_outer_cpu_rows_impl.h): GCC/Clang vectors of the register width
// FLASHMACE_CPU_VECTOR_BYTES (16 SSE2, 32 AVX2, 64 AVX-512), with internal linkage inside the ISA
// namespace FLASHMACE_CPU_ISA_NAMESPACE, so that no code built for one instruction set is linked in for
// another.
#if !defined(FLASHMACE_CPU_ISA_NAMESPACE) || !defined(FLASHMACE_CPU_VECTOR_BYTES)
#error "define FLASHMACE_CPU_ISA_NAMESPACE and FLASHMACE_CPU_VECTOR_BYTES before including cpu_vectors_impl.h"
#endif

namespace flashmace {
namespace FLASHMACE_CPU_ISA_NAMESPACE {
namespace {

typedef float VecF __attribute__((vector_size(FLASHMACE_CPU_VECTOR_BYTES)));
typedef double VecD __attribute__((vector_size(FLASHMACE_CPU_VECTOR_BYTES)));
template <typename T>
struct Simd;
template <>
struct Simd<float> {
  using V = VecF;
};
template <>
struct Simd<double> {
  using V = VecD;
};

template <typename V>
inline V load(const void* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V>
inline void store(void* p, const V& v) {
  __builtin_memcpy(p, &v, sizeof(V));
}

}  // namespace
}  // namespace FLASHMACE_CPU_ISA_NAMESPACE
}  // namespace flashmace
