#include "sc/sc_path_reduction.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace flashmace::sc_detail {

namespace {

using Dense = std::vector<double>;

double dot(const Dense& a, const Dense& b) { return std::inner_product(a.begin(), a.end(), b.begin(), 0.0); }

// Solves G x = b (G small, symmetric positive definite in exact arithmetic) by Gaussian
// elimination with partial pivoting.
Dense solve(std::vector<Dense> G, Dense b) {
  const std::size_t n = b.size();
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t piv = col;
    for (std::size_t i = col + 1; i < n; ++i)
      if (std::fabs(G[i][col]) > std::fabs(G[piv][col])) piv = i;
    std::swap(G[piv], G[col]);
    std::swap(b[piv], b[col]);
    for (std::size_t i = col + 1; i < n; ++i) {
      const double f = G[i][col] / G[col][col];
      for (std::size_t j = col; j < n; ++j) G[i][j] -= f * G[col][j];
      b[i] -= f * b[col];
    }
  }
  Dense x(n);
  for (std::size_t i = n; i-- > 0;) {
    double s = b[i];
    for (std::size_t j = i + 1; j < n; ++j) s -= G[i][j] * x[j];
    x[i] = s / G[i][i];
  }
  return x;
}

}  // namespace

ReducedPaths reduce_paths(const std::vector<PathRow>& rows, const std::vector<double>& weights, int Z, int C,
                          const ReductionTolerance& tol) {
  const int P = static_cast<int>(rows.size());
  std::map<PathRow::key_type, int> column;
  for (const PathRow& r : rows)
    for (const auto& [key, v] : r) column.emplace(key, 0);
  int ncol = 0;
  for (auto& [key, index] : column) index = ncol++;
  std::vector<Dense> dense(P, Dense(ncol, 0.0));
  for (int p = 0; p < P; ++p)
    for (const auto& [key, v] : rows[p]) dense[p][column.at(key)] = v;

  std::vector<int> order(P);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return rows[a].size() < rows[b].size(); });
  // Thresholds relative to the largest path of the order: U carries round-off residue (paths of
  // norm ~1e-15 where permutations cancel to nearly zero), which must not count as a direction.
  double max_norm = 0, max_coeff = 0;
  for (const Dense& row : dense) {
    max_norm = std::max(max_norm, std::sqrt(dot(row, row)));
    for (double x : row) max_coeff = std::max(max_coeff, std::fabs(x));
  }
  std::vector<Dense> q;
  std::vector<int> basis;
  for (int p : order) {
    Dense v = dense[p];
    for (int pass = 0; pass < 2; ++pass)  // twice: classical Gram-Schmidt loses orthogonality once
      for (const Dense& e : q) {
        const double f = dot(e, v);
        for (int j = 0; j < ncol; ++j) v[j] -= f * e[j];
      }
    const double rest = std::sqrt(dot(v, v));
    if (rest > tol.independent * max_norm) {
      for (double& x : v) x /= rest;
      q.push_back(std::move(v));
      basis.push_back(p);
    }
  }
  std::sort(basis.begin(), basis.end());
  const std::size_t r = basis.size();

  // X[p] = coordinates of path p in the basis: the normal equations G x = B path_p.
  std::vector<Dense> G(r, Dense(r));
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < r; ++j) G[i][j] = dot(dense[basis[i]], dense[basis[j]]);
  std::vector<Dense> X(P, Dense(r, 0.0));
  for (int p = 0; p < P; ++p) {
    const auto in_basis = std::find(basis.begin(), basis.end(), p);
    if (in_basis != basis.end()) {
      X[p][in_basis - basis.begin()] = 1.0;
      continue;
    }
    Dense rhs(r);
    for (std::size_t i = 0; i < r; ++i) rhs[i] = dot(dense[basis[i]], dense[p]);
    X[p] = r ? solve(G, rhs) : Dense();
    double err = 0;
    for (int j = 0; j < ncol; ++j) {
      double s = 0;
      for (std::size_t i = 0; i < r; ++i) s += X[p][i] * dense[basis[i]][j];
      err = std::max(err, std::fabs(s - dense[p][j]));
    }
    if (err > tol.reproduced * max_coeff) return {rows, weights};
  }

  ReducedPaths out;
  for (int b : basis) out.rows.push_back(rows[b]);
  out.weights.assign(static_cast<std::size_t>(Z) * r * C, 0.0);
  for (int z = 0; z < Z; ++z)
    for (int p = 0; p < P; ++p)
      for (std::size_t i = 0; i < r; ++i) {
        const double x = X[p][i];
        if (x == 0.0) continue;
        const double* w = &weights[(static_cast<std::size_t>(z) * P + p) * C];
        double* o = &out.weights[(static_cast<std::size_t>(z) * r + i) * C];
        for (int c = 0; c < C; ++c) o[c] += x * w[c];
      }
  return out;
}

}  // namespace flashmace::sc_detail
