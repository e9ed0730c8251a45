// The CPU GEMM row kernels compiled for the portable instruction set (flags: kernels/CMakeLists.txt).
#define FLASHMACE_CPU_ISA_NAMESPACE cpu_portable
#define FLASHMACE_CPU_VECTOR_BYTES 16
#include "engine/kernels/cpu_gemm_rows_impl.h"
