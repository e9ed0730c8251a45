// The species_outer CPU row kernels compiled for the portable instruction set (flags: kernels/CMakeLists.txt).
#define FLASHMACE_CPU_ISA_NAMESPACE cpu_portable
#define FLASHMACE_CPU_VECTOR_BYTES 16
#include "engine/kernels/species_outer_cpu_rows_impl.h"
