#pragma once
// Cross and dot products of 3-vectors given as pointers to their first component (cell rows,
// positions), for the structure and neighbour-list code.
#include <array>

namespace flashmace {

inline std::array<double, 3> cross(const double* a, const double* b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
inline double dot(const double* a, const double* b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

}  // namespace flashmace
