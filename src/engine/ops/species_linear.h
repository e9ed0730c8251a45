#pragma once
// The element-dependent linear of MACE's skip connection (o3.FullyConnectedTensorProduct with one-hot
// element attributes, mace_spec.md 5.3) as one linear per element present: y[rows of element s] =
// x[those rows] W_s. The reference path gathers a [n, mul_out, mul_in] weight per atom instead;
// with one element (the common bulk case) this is a plain GEMM with no gather at all.
#include <ATen/ATen.h>

#include <vector>

#include "core/irreps.h"
#include "engine/ops/irreps_linear.h"

namespace flashmace {

// The elements present in a block of atoms and, with more than one, the rows in element batches of
// equal size (the largest element's count): batch k holds the rows of elements[k] in ascending order,
// then repeats of its first row as padding.
struct SpeciesGroups {
  std::vector<int64_t> elements;
  std::vector<int64_t> counts;  // rows per element; empty with one element
  // Device int64 tensors, undefined with one element: elements as an index, the padded batches
  // (rows of the block, [elements x batch]) and each row's place in them ([rows]).
  at::Tensor element_index, batched_rows, place;
};

// present: the distinct elements of the whole step (sorted; one host synchronisation per step).
std::vector<int64_t> elements_present(const at::Tensor& species);
SpeciesGroups group_species(const at::Tensor& species, const std::vector<int64_t>& present);

// y = element_linear(x, species, weight, in, Z, out) (model/e3nn_ops.h) and its transpose (the
// x-gradient for dy): per element present, the element's slice of the weights as an IrrepsLinear on
// that element's rows (all rows with one element: no gather at all; with several, the rows gathered
// into padded element batches, one batched GEMM per weight block for all elements, the results
// gathered back: launches independent of the element count).
class SpeciesLinear {
 public:
  SpeciesLinear() = default;
  SpeciesLinear(const at::Tensor& weight, const Irreps& in, int num_elements, const Irreps& out);
  // The column layouts of x and y (IrrepsLinear::set_layouts).
  SpeciesLinear& set_layouts(IrrepsLayout in, IrrepsLayout out);

  at::Tensor forward(const at::Tensor& x, const SpeciesGroups& groups) const;
  at::Tensor transpose(const at::Tensor& g, const SpeciesGroups& groups) const;
  // forward(x, groups) added to y [n, dim(out)]
  void forward_add(const at::Tensor& x, const SpeciesGroups& groups, const at::Tensor& y) const;

 private:
  std::vector<IrrepsLinear> per_element_;  // [Z]
  IrrepsLinear stacked_;                   // per_element_ stacked
  at::Tensor apply(const at::Tensor& x, const SpeciesGroups& groups, bool transpose, const at::Tensor& add_to) const;
};

}  // namespace flashmace
