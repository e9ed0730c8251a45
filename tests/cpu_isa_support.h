#pragma once
// Runs a test body once per CPU instruction set (core/cpu_isa.h) that this processor runs.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "core/cpu_isa.h"

namespace flashmace::testing {

// f(isa) with each instruction set this processor runs chosen in turn (SCOPED_TRACE names it); the
// others are reported as not run. The choice in force before is restored.
inline void for_each_cpu_isa(const std::function<void(CpuIsa)>& f) {
  const CpuIsa chosen = cpu_isa();
  for (const CpuIsa isa : {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512}) {
    if (!cpu_isa_supported(isa)) {
      std::printf("instruction set %s: not run here (%s)\n", cpu_isa_name(isa),
                  cpu_isa_compiled(isa) ? "the processor lacks it" : "not built for this architecture");
      continue;
    }
    SCOPED_TRACE(cpu_isa_name(isa));
    set_cpu_isa(isa);
    f(isa);
  }
  set_cpu_isa(chosen);
}

}  // namespace flashmace::testing
