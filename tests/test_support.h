#pragma once
// Paths and helpers shared by the C++ tests. Locations come from CMake (tests/CMakeLists.txt).
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/local_graph.h"
#include "core/safetensors.h"
#include "core/structure.h"
#include "model/reference_model.h"

namespace flashmace::testing {

// The exit status of a test process whose cases were all skipped (test_main.cpp); CTest's
// SKIP_RETURN_CODE. (77: the automake convention for a skipped test.)
constexpr int kSkippedExitCode = 77;

inline std::string reference_dir() { return FLASHMACE_REFERENCE_DIR; }
inline std::string exported_model_dir() { return FLASHMACE_EXPORTED_MODEL_DIR; }
inline std::string reference_file(const std::string& name) {
  return reference_dir() + "/mace_" + name + ".safetensors";
}
inline std::string exported_model(const std::string& name) {
  return exported_model_dir() + "/" + name + ".safetensors";
}

// A float64 reference tensor as an ATen tensor.
at::Tensor reference_tensor(const SafetensorsFile& f, const std::string& key);

// The structure `prefix` (bulk / cluster) of a reference file and its stored edge list.
Structure reference_structure(const SafetensorsFile& f, const std::string& prefix);
Graph reference_graph(const SafetensorsFile& f, const std::string& prefix);

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b);

// Whether the engine's own CUDA kernels can run here: built with them, and a GPU present.
bool gpu_kernels_available();

// A one-domain exchanger that names each ghost's owner (HaloExchanger::local_owners), so that the
// fast engine exchanges in its own memory; it counts those exchanges and any staged call (which
// must not come).
class LocalOwnersExchanger : public OwnerMapExchanger {
 public:
  LocalOwnersExchanger(int nlocal, const std::vector<int>& owner) : OwnerMapExchanger(nlocal, owner), owner_(owner) {}
  const std::vector<int>* local_owners() override { return &owner_; }
  void exchanged_locally(bool forward, int) override { ++(forward ? local_forward : local_reverse); }
  void forward(double*, int) override { ++staged; }
  void reverse(double*, int) override { ++staged; }
  int local_forward = 0, local_reverse = 0, staged = 0;

 private:
  std::vector<int> owner_;
};

// An exchanger that takes its rows in the model's memory (HaloExchanger::rows_in_model_memory), as
// the Kokkos style does: it reads them there as tensors on `device`, exchanges a host copy with
// OwnerMapExchanger and writes the result back. Counts its calls.
class ModelMemoryExchanger : public HaloExchanger {
 public:
  ModelMemoryExchanger(int nlocal, int ntotal, const std::vector<int>& owner, const at::Device& device)
      : ntotal_(ntotal), device_(device), host_(nlocal, owner) {}
  bool rows_in_model_memory() const override { return true; }
  void forward(double* rows, int ncols) override { through_host(rows, ncols, true); }
  void reverse(double* rows, int ncols) override { through_host(rows, ncols, false); }
  int calls = 0;

 private:
  void through_host(double* rows, int ncols, bool forward);
  int ntotal_;
  at::Device device_;
  OwnerMapExchanger host_;
};

// EXPECTs energy (relative), forces, node energies and virial (absolute) of got within the bounds
// of want; `what` names the case in failures.
void expect_same_prediction(const Prediction& got, const Prediction& want, double energy_rel_tol, double abs_tol,
                            const std::string& what);

// The message of the flashmace::Error that f throws, or "<no error>".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace flashmace::testing
