#pragma once
// The number of threads the CPU kernels' next parallel region runs (OpenMP's, as set by
// OMP_NUM_THREADS or at::set_num_threads; 1 in a build without OpenMP), for sizing per-thread scratch
// and work split one part per thread.
namespace flashmace {

int cpu_threads();

}  // namespace flashmace
