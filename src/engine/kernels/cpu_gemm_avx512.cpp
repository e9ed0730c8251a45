// The CPU GEMM row kernels compiled for the avx512 instruction set (flags: kernels/CMakeLists.txt).
#define FLASHMACE_CPU_ISA_NAMESPACE cpu_avx512
#define FLASHMACE_CPU_VECTOR_BYTES 64
#include "engine/kernels/cpu_gemm_rows_impl.h"
