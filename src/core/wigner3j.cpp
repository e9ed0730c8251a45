#include "core/wigner3j.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.h"

namespace flashmace {

namespace {

using cplx = std::complex<double>;

long double factorial(int n) {
  long double f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return f;
}

// Complex Clebsch-Gordan <j1 m1 j2 m2 | j3 m3> by the Racah formula (Condon-Shortley phase).
double clebsch_gordan(int j1, int m1, int j2, int m2, int j3, int m3) {
  if (m3 != m1 + m2) return 0.0;
  const int vmin = std::max({-j1 + j2 + m3, -j1 + m1, 0});
  const int vmax = std::min({j2 + j3 + m1, j3 - j1 + j2, j3 + m3});
  const long double pre =
      (2.0L * j3 + 1.0L) * factorial(j3 + j1 - j2) * factorial(j3 - j1 + j2) * factorial(j1 + j2 - j3) *
      factorial(j3 + m3) * factorial(j3 - m3) /
      (factorial(j1 + j2 + j3 + 1) * factorial(j1 - m1) * factorial(j1 + m1) * factorial(j2 - m2) * factorial(j2 + m2));
  long double sum = 0;
  for (int v = vmin; v <= vmax; ++v) {
    const long double sign = ((v + j2 + m2) % 2 == 0) ? 1.0L : -1.0L;
    sum += sign * factorial(j2 + j3 + m1 - v) * factorial(j1 - m1 + v) /
           (factorial(v) * factorial(j3 - j1 + j2 - v) * factorial(j3 + m3 - v) * factorial(v + j1 - j2 - m3));
  }
  return static_cast<double>(std::sqrt(pre) * sum);
}

// e3nn's change_basis_real_to_complex(l): row = complex index l+m, column = real index.
std::vector<cplx> real_to_complex(int l) {
  const int d = 2 * l + 1;
  std::vector<cplx> q(d * d, 0.0);
  const double s2 = 1.0 / std::sqrt(2.0);
  for (int m = -l; m < 0; ++m) {
    q[(l + m) * d + (l - m)] = s2;
    q[(l + m) * d + (l + m)] = cplx(0, -s2);
  }
  q[l * d + l] = 1.0;
  for (int m = 1; m <= l; ++m) {
    const double sign = (m % 2 == 0) ? 1.0 : -1.0;
    q[(l + m) * d + (l + m)] = sign * s2;
    q[(l + m) * d + (l - m)] = cplx(0, sign * s2);
  }
  cplx phase = 1.0;
  for (int i = 0; i < l; ++i) phase *= cplx(0, -1);  // (-i)^l
  for (auto& x : q) x *= phase;
  return q;
}

std::vector<double> compute(int l1, int l2, int l3) {
  const int d1 = 2 * l1 + 1, d2 = 2 * l2 + 1, d3 = 2 * l3 + 1;
  std::vector<double> cg(d1 * d2 * d3, 0.0);
  for (int m1 = -l1; m1 <= l1; ++m1)
    for (int m2 = -l2; m2 <= l2; ++m2) {
      const int m3 = m1 + m2;
      if (std::abs(m3) <= l3)
        cg[((l1 + m1) * d2 + (l2 + m2)) * d3 + (l3 + m3)] = clebsch_gordan(l1, m1, l2, m2, l3, m3);
    }
  const auto q1 = real_to_complex(l1), q2 = real_to_complex(l2), q3 = real_to_complex(l3);
  std::vector<double> out(d1 * d2 * d3, 0.0);
  double norm2 = 0;
  for (int j = 0; j < d1; ++j)
    for (int k = 0; k < d2; ++k)
      for (int m = 0; m < d3; ++m) {
        cplx s = 0;
        for (int a = 0; a < d1; ++a)
          for (int b = 0; b < d2; ++b)
            for (int n = 0; n < d3; ++n) {
              const double c = cg[(a * d2 + b) * d3 + n];
              if (c != 0.0) s += q1[a * d1 + j] * q2[b * d2 + k] * std::conj(q3[n * d3 + m]) * c;
            }
        out[(j * d2 + k) * d3 + m] = s.real();
        norm2 += s.real() * s.real();
      }
  const double norm = std::sqrt(norm2);
  for (auto& x : out) x /= norm;
  return out;
}

}  // namespace

const std::vector<double>& wigner_3j(int l1, int l2, int l3) {
  if (l1 < 0 || l2 < 0 || l3 < 0 || l3 < std::abs(l1 - l2) || l3 > l1 + l2)
    throw Error("wigner_3j(" + std::to_string(l1) + ", " + std::to_string(l2) + ", " + std::to_string(l3) +
                "): the triple violates the triangle inequality");
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int>, std::vector<double>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_tuple(l1, l2, l3);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, compute(l1, l2, l3)).first;
  return it->second;
}

}  // namespace flashmace
