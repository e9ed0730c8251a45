// The CPU GEMM row kernels compiled for the avx2 instruction set (flags: kernels/CMakeLists.txt).
#define FLASHMACE_CPU_ISA_NAMESPACE cpu_avx2
#define FLASHMACE_CPU_VECTOR_BYTES 32
#include "engine/kernels/cpu_gemm_rows_impl.h"
