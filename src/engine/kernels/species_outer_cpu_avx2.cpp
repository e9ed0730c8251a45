// The species_outer CPU row kernels compiled for the avx2 instruction set (flags: kernels/CMakeLists.txt).
#define FLASHMACE_CPU_ISA_NAMESPACE cpu_avx2
#define FLASHMACE_CPU_VECTOR_BYTES 32
#include "engine/kernels/species_outer_cpu_rows_impl.h"
