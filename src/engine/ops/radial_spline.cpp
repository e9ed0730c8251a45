#include "engine/ops/radial_spline.h"

#include <cmath>
#include <optional>
#include <string>

#include "core/error.h"
#include "engine/kernels/radial_spline_kernels.h"
#include "engine/ops/edge_terms.h"

#if FLASHMACE_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmace {

namespace {

// The first knot sits at r = 0, where the radial features are 0/0 in floating point: it is
// evaluated a hair above (the functions are smooth and even in r there, and no edge is that short).
constexpr double kFirstKnot = 1e-9;

// Where the error is measured inside each interval: a cubic Hermite piece's error term
// f''''(x) t^2 (1 - t)^2 h^4 / 24 peaks at the middle, its slope's near the quarter points.
constexpr double kSamples[] = {0.25, 0.5, 0.75};

struct Pieces {
  at::Tensor c0, c1, c2, c3;  // [N, K] float64: the interval's polynomial in t
};

Pieces hermite_pieces(const at::Tensor& f, const at::Tensor& df, double h) {
  const int64_t n = f.size(0) - 1;
  const at::Tensor p0 = f.narrow(0, 0, n), p1 = f.narrow(0, 1, n);
  const at::Tensor m0 = df.narrow(0, 0, n) * h, m1 = df.narrow(0, 1, n) * h;
  return {p0, m0, 3 * (p1 - p0) - 2 * m0 - m1, 2 * (p0 - p1) + m0 + m1};
}

template <typename T>
RadialSplineArgs<T> args_for(const at::Tensor& table, int64_t width, double spacing, const at::Tensor& vectors,
                             const at::Tensor& first) {
  RadialSplineArgs<T> a;
  a.table = table.data_ptr<T>();
  a.intervals = table.size(0);
  a.width = width;
  a.spacing = static_cast<T>(spacing);
  a.vectors = vectors.data_ptr<T>();
  a.first = first.defined() ? first.data_ptr<int64_t>() : nullptr;
  a.rows = first.defined() ? first.size(0) : vectors.size(0);
  return a;
}

void check_inputs(const at::Tensor& table, const at::Tensor& vectors, const at::Tensor& first) {
  if (vectors.scalar_type() != table.scalar_type() || vectors.device() != table.device())
    throw Error("radial spline: edge vectors must be in the table's dtype and device");
  if (vectors.dim() != 2 || vectors.size(1) != 3) throw Error("radial spline: edge vectors must be [E, 3]");
  if (first.defined() && (first.scalar_type() != at::kLong || first.device() != table.device()))
    throw Error("radial spline: row edges must be int64 on the table's device");
}

#if FLASHMACE_CUDA_KERNELS
void* stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
#endif

}  // namespace

std::pair<at::Tensor, at::Tensor> exact_radial_functions(const MaceParams& model64,
                                                         const std::vector<at::Tensor>& folded64, bool hidden_only,
                                                         const at::Tensor& r) {
  const int64_t n = r.size(0);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  at::Tensor vectors = at::zeros({n, 3}, f64);
  vectors.select(1, 0).copy_(r);
  const at::Tensor z = at::full({n}, model64.atomic_numbers[0].item<int64_t>(), at::TensorOptions().dtype(at::kLong));
  const EdgeGeometry g = edge_geometry(model64, vectors, z, z);
  // The MLP and its derivative along r, forward: d silu(p) = sigmoid(p) (1 + p (1 - sigmoid(p))) dp.
  at::Tensor x = g.ef, dx = g.def_dr;
  for (std::size_t k = 0; k + 1 < folded64.size(); ++k) {
    const at::Tensor p = at::mm(x, folded64[k]), dp = at::mm(dx, folded64[k]);
    const at::Tensor s = at::sigmoid(p);
    x = p * s;
    dx = dp * (s * (1 + p * (1 - s)));
  }
  if (hidden_only) return {x, dx};
  return {at::mm(x, folded64.back()), at::mm(dx, folded64.back())};
}

RadialSplineOp::RadialSplineOp(const MaceParams& model64, const std::vector<at::Tensor>& folded64, bool hidden_only,
                               int64_t intervals, double tolerance, const at::TensorOptions& options) {
  if (!model64.config.distance_transform.empty())
    throw Error("radial spline: this model's radial features depend on the elements of each pair (distance_transform " +
                model64.config.distance_transform +
                "), which a table over the edge length cannot hold; use radial exact");
  if (intervals < 0 || intervals > kMaxIntervals)
    throw Error("radial spline: " + std::to_string(intervals) + " intervals; use 0 (automatic) up to " +
                std::to_string(kMaxIntervals));
  const double r_max = model64.config.r_max;
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  Pieces pieces;
  for (int64_t n = intervals > 0 ? intervals : 64;; n *= 2) {
    const double h = r_max / static_cast<double>(n);
    at::Tensor knots = at::arange(n + 1, f64) * h;
    knots[0] = kFirstKnot * r_max;
    const auto [f, df] = exact_radial_functions(model64, folded64, hidden_only, knots);
    pieces = hermite_pieces(f, df, h);
    RadialSplineAccuracy acc;
    acc.intervals = n;
    acc.value_scale = f.abs().max().item<double>();
    acc.slope_scale = df.abs().max().item<double>();
    for (const double t : kSamples) {
      const auto [fs, dfs] = exact_radial_functions(model64, folded64, hidden_only, (at::arange(n, f64) + t) * h);
      const at::Tensor value = pieces.c0 + t * (pieces.c1 + t * (pieces.c2 + t * pieces.c3));
      const at::Tensor slope = (pieces.c1 + 2 * t * pieces.c2 + 3 * t * t * pieces.c3) / h;
      acc.value_error = std::max(acc.value_error, (value - fs).abs().max().item<double>());
      acc.slope_error = std::max(acc.slope_error, (slope - dfs).abs().max().item<double>());
      acc.value_scale = std::max(acc.value_scale, fs.abs().max().item<double>());
      acc.slope_scale = std::max(acc.slope_scale, dfs.abs().max().item<double>());
    }
    if (!std::isfinite(acc.value_error) || !std::isfinite(acc.slope_error))
      throw Error("radial spline: the radial MLP is not finite on [0, r_max]; use radial exact");
    accuracy_ = acc;
    spacing_ = h;
    const bool met = acc.value_error <= tolerance * acc.value_scale && acc.slope_error <= tolerance * acc.slope_scale;
    if (intervals > 0 || met || 2 * n > kMaxIntervals) break;
  }
  width_ = pieces.c0.size(1);
  at::Tensor table = at::stack({pieces.c0, pieces.c1, pieces.c2, pieces.c3}, 1);  // [N, 4, K]
  if (options.device().is_cuda()) table = table.transpose(1, 2);                   // [N, K, 4]
  table_ = table.to(options).contiguous();
}

namespace {

// Each call sorts its rows by interval into scratch tensors (radial_spline_kernels.h), then runs.
template <typename T>
struct SortedRows {
  at::Tensor interval, t, order, count;
  RadialSplineRows<T> rows;
  SortedRows(const RadialSplineArgs<T>& a, const at::Tensor& like) {
    const auto opts = like.options();
    interval = at::empty({a.rows}, opts.dtype(at::kInt));
    t = at::empty({a.rows}, opts);
    order = at::empty({a.rows}, opts.dtype(at::kLong));
    count = at::empty({a.intervals + 2}, opts.dtype(at::kInt));
    rows = {interval.data_ptr<int32_t>(), t.data_ptr<T>(), order.data_ptr<int64_t>(), count.data_ptr<int32_t>()};
#if FLASHMACE_CUDA_KERNELS
    if (like.is_cuda()) {
      radial_spline_sort_cuda(a, rows, stream_of(like));
      return;
    }
#endif
    if (like.is_cuda()) throw Error("radial spline: flashmace was built without its CUDA kernels");
    radial_spline_sort_cpu(a, rows);
  }
};

}  // namespace

namespace {

// Runs cuda(rows, stream) or cpu(rows) on the rows of `vectors` / `first`, sorted by interval.
template <typename T, typename Cuda, typename Cpu>
void on_sorted_rows(const RadialSplineArgs<T>& a, const at::Tensor& vectors, const Cuda& cuda, const Cpu& cpu) {
#if FLASHMACE_CUDA_KERNELS
  const c10::cuda::OptionalCUDAGuard guard(vectors.is_cuda() ? std::optional<at::Device>(vectors.device())
                                                              : std::nullopt);
#endif
  const SortedRows<T> sorted(a, vectors);
#if FLASHMACE_CUDA_KERNELS
  if (vectors.is_cuda()) return cuda(sorted.rows, stream_of(vectors));
#else
  (void)cuda;  // (SortedRows refused CUDA tensors already)
#endif
  cpu(sorted.rows);
}

}  // namespace

at::Tensor RadialSplineOp::forward(const at::Tensor& vectors_in, const at::Tensor& first) const {
  const at::Tensor vectors = vectors_in.contiguous();
  check_inputs(table_, vectors, first);
  const int64_t rows = first.defined() ? first.size(0) : vectors.size(0);
  at::Tensor out = at::empty({rows, width_}, vectors.options());
  AT_DISPATCH_FLOATING_TYPES(vectors.scalar_type(), "radial_spline_forward", [&] {
    const auto a = args_for<scalar_t>(table_, width_, spacing_, vectors, first);
    scalar_t* o = out.data_ptr<scalar_t>();
    on_sorted_rows(
        a, vectors,
        [&](const RadialSplineRows<scalar_t>& r, void* stream) { radial_spline_forward_cuda(a, r, o, stream); },
        [&](const RadialSplineRows<scalar_t>& r) { radial_spline_forward_cpu(a, r, o); });
  });
  return out;
}

at::Tensor RadialSplineOp::backward(const at::Tensor& vectors_in, const at::Tensor& first,
                                    const at::Tensor& grad_in) const {
  const at::Tensor vectors = vectors_in.contiguous(), grad = grad_in.contiguous();
  check_inputs(table_, vectors, first);
  const int64_t rows = first.defined() ? first.size(0) : vectors.size(0);
  if (grad.dim() != 2 || grad.size(0) != rows || grad.size(1) != width_ || grad.scalar_type() != vectors.scalar_type())
    throw Error("radial spline: the gradient must be [" + std::to_string(rows) + ", " + std::to_string(width_) +
                "] in the table's dtype");
  at::Tensor dr = at::empty({rows}, vectors.options());
  AT_DISPATCH_FLOATING_TYPES(vectors.scalar_type(), "radial_spline_backward", [&] {
    const auto a = args_for<scalar_t>(table_, width_, spacing_, vectors, first);
    const scalar_t* g = grad.data_ptr<scalar_t>();
    scalar_t* d = dr.data_ptr<scalar_t>();
    on_sorted_rows(
        a, vectors,
        [&](const RadialSplineRows<scalar_t>& r, void* stream) { radial_spline_backward_cuda(a, r, g, d, stream); },
        [&](const RadialSplineRows<scalar_t>& r) { radial_spline_backward_cpu(a, r, g, d); });
  });
  return dr;
}

void RadialSplineOp::add_edge_gradient(const at::Tensor& vectors_in, const RadialPairs* pairs, const at::Tensor& dr,
                                       at::Tensor& gv) const {
  const at::Tensor vectors = vectors_in.contiguous();
  if (!gv.is_contiguous()) gv = gv.contiguous();
  const int64_t edges = vectors.size(0);
  if (!gv.sizes().equals(vectors.sizes()) || gv.scalar_type() != vectors.scalar_type())
    throw Error("radial spline: the edge gradient must be [E, 3] like the vectors");
  const at::Tensor index = pairs ? pairs->index.contiguous() : at::Tensor();
  const at::Tensor share = pairs ? pairs->share.contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(vectors.scalar_type(), "radial_spline_edge_gradient", [&] {
    const int64_t* ip = index.defined() ? index.data_ptr<int64_t>() : nullptr;
    const scalar_t* sp = share.defined() ? share.data_ptr<scalar_t>() : nullptr;
#if FLASHMACE_CUDA_KERNELS
    if (vectors.is_cuda()) {
      const c10::cuda::CUDAGuard guard(vectors.device());
      radial_spline_edge_gradient_cuda(vectors.data_ptr<scalar_t>(), ip, sp, dr.data_ptr<scalar_t>(), edges,
                                       gv.data_ptr<scalar_t>(), stream_of(vectors));
      return;
    }
#endif
    radial_spline_edge_gradient_cpu(vectors.data_ptr<scalar_t>(), ip, sp, dr.data_ptr<scalar_t>(), edges,
                                    gv.data_ptr<scalar_t>());
  });
}

}  // namespace flashmace
