#include "model/symmetric_contraction.h"

namespace flashmace {

at::Tensor symmetric_contraction(const at::Tensor& A, const at::Tensor& species, const ContractionWeights& w) {
  const int64_t n = A.size(0), c = A.size(1), k = A.size(2);
  const int64_t m = 2 * w.l_out + 1;
  const int nu_max = static_cast<int>(w.U.size());
  const at::Tensor a = A.reshape({n * c, k});

  // Highest order first, the way MACE contracts it: the outer product of A with the element's
  // weights meets U over (path, last ell index), so no [N, C, M, K^nu] tensor is formed.
  const at::Tensor& u_top = w.U[nu_max - 1];
  const int64_t p_top = u_top.size(-1);
  const at::Tensor w_top = w.weights[nu_max - 1].index_select(0, species);  // [N, P, C]
  const at::Tensor outer = at::einsum("npc,nci->ncip", {w_top, A}).reshape({n * c, k * p_top});
  const at::Tensor u_top_mat = u_top.reshape({u_top.numel() / (k * p_top), k * p_top});  // [(M) K^(nu-1), K*P]
  at::Tensor out = at::matmul(outer, u_top_mat.t());                                     // [N*C, (M) K^(nu-1)]

  for (int nu = nu_max - 1; nu >= 1; --nu) {
    const at::Tensor& u = w.U[nu - 1];
    const int64_t p = u.size(-1);
    const at::Tensor wn = w.weights[nu - 1].index_select(0, species).permute({0, 2, 1}).reshape({n * c, p});
    out = out + at::matmul(wn, u.reshape({u.numel() / p, p}).t());  // + T_nu
    // contract the last ell index with A
    out = at::bmm(out.reshape({n * c, out.size(1) / k, k}), a.unsqueeze(2)).squeeze(2);
  }
  return out.reshape({n, c * m});
}

}  // namespace flashmace
