#pragma once
// Operands for float32 GEMMs on TF32 tensor cores to float32's accuracy ("split TF32"). A float32
// value x is written as hi + lo, hi = tf32(x) and lo = tf32(x - hi): 2 x 11 significant bits of
// x's 24. A product a b is then a_hi b_hi + a_hi b_lo + a_lo b_hi (the dropped a_lo b_lo is ~2^-22
// of it), and h W = [h_hi | h_hi | h_lo] [W_hi ; W_lo ; W_hi]: one TF32 GEMM with three times the
// inner dimension, whose error (~7e-7 relative on the radial MLP's shapes) is float32's order, where
// one TF32 product alone (cuBLAS's TF32 mode) errs by ~3e-4. tf32() rounds to nearest and leaves
// non-finite values as they are. Torch-free; ops/tf32_gemm.h runs the GEMM.
#include <cstdint>

namespace flashmace {

// hi [n], lo [n] from x [n] (the weights, once).
void split_tf32_cuda(const float* x, int64_t n, float* hi, float* lo, void* stream);

// out [m, 3k] = [hi(s) | hi(s) | lo(s)] per row, s = silu(pre) [m, k]: the radial MLP's last hidden
// activation, taken and split in one pass.
void silu_split_tf32_cuda(const float* pre, int64_t m, int64_t k, float* out, void* stream);

}  // namespace flashmace
