#include "test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/device.h"

namespace flashmace::testing {

at::Tensor reference_tensor(const SafetensorsFile& f, const std::string& key) {
  const std::vector<double> v = f.to_doubles(key);
  return at::tensor(v, at::TensorOptions().dtype(at::kDouble)).reshape(f.tensor(key).shape);
}

Structure reference_structure(const SafetensorsFile& f, const std::string& prefix) {
  Structure s;
  for (double z : f.to_doubles(prefix + ".input.atomic_numbers")) s.atomic_numbers.push_back(static_cast<int>(z));
  s.positions = f.to_doubles(prefix + ".input.positions");
  const std::vector<double> cell = f.to_doubles(prefix + ".input.cell");
  std::copy(cell.begin(), cell.end(), s.cell.begin());
  const std::vector<double> pbc = f.to_doubles(prefix + ".input.pbc");
  for (int d = 0; d < 3; ++d) s.pbc[d] = pbc[d] != 0;
  return s;
}

Graph reference_graph(const SafetensorsFile& f, const std::string& prefix) {
  Graph g;
  const std::vector<double> ei = f.to_doubles(prefix + ".input.edge_index");
  const std::vector<double> us = f.to_doubles(prefix + ".input.unit_shifts");
  const std::size_t e = ei.size() / 2;
  g.num_nodes = static_cast<int>(f.tensor(prefix + ".input.atomic_numbers").numel());
  for (std::size_t k = 0; k < e; ++k) {
    g.sender.push_back(static_cast<int64_t>(ei[k]));
    g.receiver.push_back(static_cast<int64_t>(ei[e + k]));
  }
  for (double x : us) g.unit_shifts.push_back(static_cast<int>(std::lround(x)));
  return g;
}

bool gpu_kernels_available() {
#if FLASHMACE_CUDA_KERNELS
  return cuda_available();
#else
  return false;
#endif
}

void ModelMemoryExchanger::through_host(double* rows, int ncols, bool forward) {
  const at::Tensor there = at::from_blob(rows, {ntotal_, ncols}, at::TensorOptions().dtype(at::kDouble).device(device_));
  at::Tensor host = there.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous();
  if (forward)
    host_.forward(host.data_ptr<double>(), ncols);
  else
    host_.reverse(host.data_ptr<double>(), ncols);
  there.copy_(host);
  if (there.is_cuda()) synchronize_device(there.device().str());  // done when the call returns
  ++calls;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = a.size() == b.size() ? 0.0 : INFINITY;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    // A non-finite value on either side is a failure, never a small difference (std::max drops NaN).
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    m = std::max(m, std::abs(a[i] - b[i]));
  }
  return m;
}

void expect_same_prediction(const Prediction& got, const Prediction& want, double energy_rel_tol, double abs_tol,
                            const std::string& what) {
  EXPECT_LE(std::abs(got.energy - want.energy) / std::abs(want.energy), energy_rel_tol) << what;
  EXPECT_LE(max_abs_diff(got.forces, want.forces), abs_tol) << what;
  EXPECT_LE(max_abs_diff(got.node_energy, want.node_energy), abs_tol) << what;
  const std::vector<double> a(got.virial.begin(), got.virial.end()), b(want.virial.begin(), want.virial.end());
  EXPECT_LE(max_abs_diff(a, b), abs_tol) << what;
}

}  // namespace flashmace::testing
