#pragma once
// The instruction sets the CPU kernels are compiled for, and the one they run with: the best the
// processor supports, or the one named by FLASHMACE_CPU_ISA (portable | avx2 | avx512) or set_cpu_isa.
#include <string>

namespace flashmace {

enum class CpuIsa { portable = 0, avx2 = 1, avx512 = 2 };
constexpr int kNumCpuIsas = 3;

const char* cpu_isa_name(CpuIsa isa);
// Built into this binary (avx2 and avx512 only on x86-64) and runnable on this processor.
bool cpu_isa_compiled(CpuIsa isa);
bool cpu_isa_supported(CpuIsa isa);
CpuIsa best_cpu_isa();
// The instruction set the CPU kernels use now. Throws flashmace::Error when FLASHMACE_CPU_ISA names an
// unknown or unsupported one.
CpuIsa cpu_isa();
// Overrides the choice for the whole process (tests, benchmarks); throws when `isa` is unsupported.
void set_cpu_isa(CpuIsa isa);
// "avx512" -> CpuIsa::avx512; throws with the list of names when `name` is unknown.
CpuIsa parse_cpu_isa(const std::string& name);

}  // namespace flashmace
