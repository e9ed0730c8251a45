#pragma once
// Internal to the SC descriptor: removes linearly dependent coupling paths of one order.
// MACE stacks every coupling tree along U's path axis (mace_spec.md 7.2), and after merging
// permutations many paths are linear combinations of others (MP-0 medium, correlation 3: rank 8 of
// 23 paths for 0e, 12 of 51 for 1o). With path_p = sum_b X[p, b] path_b over a basis b,
//   sum_p W[z, p, c] path_p = sum_b (sum_p X[p, b] W[z, p, c]) path_b,
// so the weights are mixed once at load time and only the basis paths' terms remain.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace flashmace::sc_detail {

// One path's polynomial: (m, sorted monomial) -> merged coefficient.
using PathRow = std::map<std::pair<int, std::vector<int32_t>>, double>;

struct ReducedPaths {
  std::vector<PathRow> rows;    // the basis paths' polynomials, in ascending original path order
  std::vector<double> weights;  // [Z, rows.size(), C]: mixed weights
};

// How exactly the stored U is known: float64 files hold U to ~1e-16, float32 files to ~6e-8, so
// dependencies among paths hold only to that precision.
struct ReductionTolerance {
  double independent;  // Gram-Schmidt residual, relative to the order's largest path norm
  double reproduced;   // error of a dependent path's combination, relative to the largest coefficient
};
constexpr ReductionTolerance kReduceFloat64{1e-10, 1e-13};
constexpr ReductionTolerance kReduceFloat32{1e-5, 1e-6};

// weights: [Z, rows.size(), C]. Basis: sparsest paths first (fewest terms), a path joins when its
// Gram-Schmidt residual exceeds tol.independent. Every other path must be reproduced by its
// combination to tol.reproduced; if one is not, the input is returned unreduced.
ReducedPaths reduce_paths(const std::vector<PathRow>& rows, const std::vector<double>& weights, int Z, int C,
                          const ReductionTolerance& tol);

}  // namespace flashmace::sc_detail
