// Run-time choice of the CPU kernels' instruction set (cpu_isa.h).
#include "core/cpu_isa.h"

#include <atomic>
#include <cstdlib>

#include "core/error.h"

namespace flashmace {

namespace {

// -1: not chosen yet (the environment or the processor decides at the first call).
std::atomic<int> g_isa{-1};

bool processor_runs(CpuIsa isa) {
#if FLASHMACE_CPU_X86_VARIANTS
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::portable:
      return true;
    case CpuIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuIsa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("fma");
  }
  return false;
#else
  return isa == CpuIsa::portable;
#endif
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::portable:
      return "portable";
    case CpuIsa::avx2:
      return "avx2";
    case CpuIsa::avx512:
      return "avx512";
  }
  return "?";
}

bool cpu_isa_compiled(CpuIsa isa) {
#if FLASHMACE_CPU_X86_VARIANTS
  static_cast<void>(isa);
  return true;
#else
  return isa == CpuIsa::portable;
#endif
}

bool cpu_isa_supported(CpuIsa isa) { return cpu_isa_compiled(isa) && processor_runs(isa); }

CpuIsa best_cpu_isa() {
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::avx2})
    if (cpu_isa_supported(isa)) return isa;
  return CpuIsa::portable;
}

CpuIsa parse_cpu_isa(const std::string& name) {
  for (CpuIsa isa : {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512})
    if (name == cpu_isa_name(isa)) return isa;
  throw Error("unknown CPU instruction set '" + name + "': use portable, avx2 or avx512");
}

void set_cpu_isa(CpuIsa isa) {
  if (!cpu_isa_supported(isa))
    throw Error(std::string("CPU instruction set '") + cpu_isa_name(isa) + "' is not " +
                (cpu_isa_compiled(isa) ? "supported by this processor" : "built into this flashmace") +
                "; the best here is '" + cpu_isa_name(best_cpu_isa()) + "'");
  g_isa = static_cast<int>(isa);
}

CpuIsa cpu_isa() {
  const int chosen = g_isa.load();
  if (chosen >= 0) return static_cast<CpuIsa>(chosen);
  const char* env = std::getenv("FLASHMACE_CPU_ISA");
  if (env && *env) {
    const CpuIsa isa = parse_cpu_isa(env);
    if (!cpu_isa_supported(isa))
      throw Error(std::string("FLASHMACE_CPU_ISA=") + env + ": this " +
                  (cpu_isa_compiled(isa) ? "processor does not support it" : "flashmace was built without it") +
                  "; unset it or use '" + cpu_isa_name(best_cpu_isa()) + "'");
    g_isa = static_cast<int>(isa);
    return isa;
  }
  g_isa = static_cast<int>(best_cpu_isa());
  return static_cast<CpuIsa>(g_isa.load());
}

}  // namespace flashmace
