#pragma once
// Wigner-3j symbols in e3nn's real basis (mace_spec.md 5.4): shape [2l1+1, 2l2+1, 2l3+1],
// row-major, Frobenius norm 1. Matches e3nn >= 0.5 for every triple, and MACE's e3nn 0.4.4 for
// every parity-allowed (l1+l2+l3 even) triple, the only ones MACE's conv tensor product uses.
#include <vector>

namespace flashmace {

// Throws flashmace::Error if the triple violates the triangle inequality.
const std::vector<double>& wigner_3j(int l1, int l2, int l3);

}  // namespace flashmace
