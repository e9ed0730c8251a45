#pragma once
// The kernels of `radial spline` (ops/radial_spline.h): K radial functions R_k(r) tabulated as
// cubic Hermite pieces on N equal intervals of [0, r_max]. Per table row u (an edge, or the first
// edge of a pair of reverse edges) the row's length r = |v| picks interval i = floor(r / h) and
// t = r / h - i; the forward pass writes R_k = c0 + t (c1 + t (c2 + t c3)), the backward pass
// dE/dr = sum_k dE/dR_k (c1 + t (2 c2 + 3 t c3)) / h; beyond r_max both are zero (as the exact
// radial features are).
//
// A table row's coefficients are K x 4 values (20 KB for K = 1280 in float32), far more than the
// row's own output, so rows are first sorted by interval (a counting sort, radial_spline_sort_*):
// rows that share an interval then read its coefficients once. Each row's values are computed on
// their own and each row's sum over k runs in a fixed order, so the results do not depend on the
// order rows are visited in (nor on the thread count). Torch-free: raw pointers, CPU loops
// (OpenMP) and their CUDA twins.
#include <cstdint>

namespace flashmace {

template <typename T>
struct RadialSplineArgs {
  // CPU: [N][4][K] (a coefficient's K values contiguous, for the vector units); CUDA: [N][K][4]
  // (a function's four coefficients contiguous, one vector load per thread).
  const T* table = nullptr;
  int64_t intervals = 0;           // N
  int64_t width = 0;               // K
  T spacing = 0;                   // h = r_max / N
  const T* vectors = nullptr;      // [E, 3] edge vectors
  const int64_t* first = nullptr;  // [U] each row's edge, or null: row u is edge u
  int64_t rows = 0;                // U
};

// Scratch of one call, filled by radial_spline_sort_*: each row's interval (N beyond r_max) and
// position t, and the rows in interval order.
template <typename T>
struct RadialSplineRows {
  int32_t* interval = nullptr;  // [U]
  T* t = nullptr;               // [U]
  int64_t* order = nullptr;     // [U]
  int32_t* count = nullptr;     // [N + 2] (CUDA; the CPU sort keeps its own)
};

template <typename T>
void radial_spline_sort_cpu(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s);
// out [U, K]
template <typename T>
void radial_spline_forward_cpu(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s, T* out);
// grad [U, K] = dE/dR; dr [U] = dE/dr per row
template <typename T>
void radial_spline_backward_cpu(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s, const T* grad, T* dr);
// gv [E, 3] += dr[row(e)] share(e) v_e / |v_e|, row(e) = index[e] (or e when index is null),
// share(e) = share[e] (or 1 when share is null): a row's distance gradient handed to its edges.
template <typename T>
void radial_spline_edge_gradient_cpu(const T* vectors, const int64_t* index, const T* share, const T* dr,
                                     int64_t edges, T* gv);

template <typename T>
void radial_spline_sort_cuda(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s, void* stream);
template <typename T>
void radial_spline_forward_cuda(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s, T* out, void* stream);
template <typename T>
void radial_spline_backward_cuda(const RadialSplineArgs<T>& a, const RadialSplineRows<T>& s, const T* grad, T* dr,
                                 void* stream);
template <typename T>
void radial_spline_edge_gradient_cuda(const T* vectors, const int64_t* index, const T* share, const T* dr,
                                      int64_t edges, T* gv, void* stream);

}  // namespace flashmace
