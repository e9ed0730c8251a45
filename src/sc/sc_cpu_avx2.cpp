// The SC executor's CPU loops compiled for the avx2 instruction set (flags: sc/CMakeLists.txt).
#define FLASHMACE_SC_CPU_NAMESPACE sc_cpu_avx2
#include "sc/sc_cpu_kernels_impl.h"
