// Generates the specialised conv TP kernels (conv_tp_codegen.h). Register names:
//   xB_m   x[xindex[e], x_offset(B) + u*d1 + m] of input block B (blocks numbered by first use; in
//          ir_mul descriptors the ir_mul column, as for the message sums)
//   yK     Y[e, K]
//   aP_m   forward accumulator of path P, output component m (double, summed over the row's edges)
//   bP_m   its partial sum (T) over one block of edges
//   gP_m   dagg[row, mid_offset(P) + u*d3 + m] (backward, loaded once per row)
//   dxB_m, pyK  one edge's x- and Y-gradients of this channel
// Every Wigner-3j entry c (alpha folded in) of path P contributes
//   forward: aP_m3 += r_P * c x_m1 y_m2
//   backward (cg = c gP_m3): dR_P += cg x_m1 y_m2;  dx_m1 += r_P cg y_m2;  py_m2 += r_P cg x_m1
// and the warp then sums py over its 32 channels by recursive halving (reduce-scatter: P/2 + P/4 +
// ... + 1 shuffles for P padded components, instead of 5 per component).
#include "engine/kernels/conv_tp_codegen.h"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>

#include "sc/sc_codegen.h"

namespace flashmace {

namespace {

constexpr int kMaxMidPerChannel = 64;  // sum of d3 over paths: the backward keeps them in registers
constexpr int kForwardEdgeBlock = 8;   // edges per float partial sum of the forward kernel
// Message components per forward thread group. MP-0-medium's 40 in one thread took 167 registers in
// float32 (12 warps per SM, the SMs 22 % busy at 864 atoms); in two groups 114, and the forward
// kernel 0.425 -> 0.253 ms at 864 atoms on an H100. Three and four groups measured no better.
constexpr int kForwardMidPerGroup = 24;

int next_power_of_two(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// Input blocks by x_offset, numbered in order of first use.
std::map<int, int> input_blocks(const ConvTPDescriptor& d) {
  std::map<int, int> blocks;
  for (const ConvTPPathDescriptor& p : d.paths) blocks.emplace(p.x_offset, static_cast<int>(blocks.size()));
  return blocks;
}

std::string xname(const std::map<int, int>& blocks, const ConvTPPathDescriptor& p, int m1, const char* prefix = "x") {
  return prefix + std::to_string(blocks.at(p.x_offset)) + "_" + std::to_string(m1);
}
std::string yname(const ConvTPPathDescriptor& p, int m2, const char* prefix = "y") {
  return prefix + std::to_string(p.y_offset + m2);
}
std::string pname(const char* prefix, std::size_t path, int m) {
  return prefix + std::to_string(path) + "_" + std::to_string(m);
}

// The column of component m of channel u in a block at `offset` of irrep dimension d: u d + m past
// the offset in mul_ir; in ir_mul m run mul + u past the block's run offset and channel offset, so
// that a warp's 32 channels read and write 32 adjacent values.
std::string column(const ConvTPDescriptor& d, int offset, int dim, const IrMulPlace& place, int m) {
  if (!d.ir_mul) return std::to_string(offset) + " + u * " + std::to_string(dim) + " + " + std::to_string(m);
  return std::to_string(place.run_offset + m * place.run_mul + place.channel_offset) + " + u";
}
std::string mid_column(const ConvTPDescriptor& d, const ConvTPPathDescriptor& p, int m) {
  return column(d, p.mid_offset, p.d3, p.mid_place, m);
}

std::vector<const ConvTPPathDescriptor*> all_paths(const ConvTPDescriptor& d) {
  std::vector<const ConvTPPathDescriptor*> out;
  for (const ConvTPPathDescriptor& p : d.paths) out.push_back(&p);
  return out;
}

// The first of `paths` that reads each input block (its offset, dimension and ir_mul place), by x_offset.
std::map<int, const ConvTPPathDescriptor*> input_block_paths(const std::vector<const ConvTPPathDescriptor*>& paths) {
  std::map<int, const ConvTPPathDescriptor*> out;
  for (const ConvTPPathDescriptor* p : paths) out.emplace(p->x_offset, p);
  return out;
}

// Message components per channel: the sum of d3 over the paths.
int mid_per_channel(const ConvTPDescriptor& d) {
  int n = 0;
  for (const ConvTPPathDescriptor& p : d.paths) n += p.d3;
  return n;
}

// The edge loop's loads for `paths`: this channel's x values of the blocks they read, the Y
// components they use, R's row.
void emit_edge_loads(std::ostringstream& s, const ConvTPDescriptor& d, const std::map<int, int>& blocks,
                     const std::vector<const ConvTPPathDescriptor*>& paths) {
  s << "    const T* __restrict__ xr = x + xindex[e] * " << d.dim_in1 << "LL;\n"
    << "    const T* __restrict__ ye = Y + e * " << d.dim_sh << "LL;\n"
    << "    const T* __restrict__ re = R + (rindex ? rindex[e] : e) * " << d.weight_numel << "LL + u;\n";
  for (const auto& [offset, p] : input_block_paths(paths))
    for (int m = 0; m < p->d1; ++m)
      s << "    const T x" << blocks.at(offset) << "_" << m << " = xr[" << column(d, offset, p->d1, p->x_place, m)
        << "];\n";
  std::vector<bool> used(d.dim_sh, false);
  for (const ConvTPPathDescriptor* p : paths)
    for (int m = 0; m < p->d2; ++m) used[p->y_offset + m] = true;
  for (int k = 0; k < d.dim_sh; ++k)
    if (used[k]) s << "    const T y" << k << " = ye[" << k << "];\n";
}

// The forward kernel's thread groups: conv_tp_forward_groups(d) runs of consecutive paths (path
// indices [first, last)) that minimise the largest group's work, a path's work being its
// multiply-adds per edge and channel (two per Wigner-3j term, one per output component).
std::vector<std::pair<std::size_t, std::size_t>> forward_path_groups(const ConvTPDescriptor& d) {
  const std::size_t n = d.paths.size(), groups = static_cast<std::size_t>(conv_tp_forward_groups(d));
  std::vector<long long> prefix(n + 1, 0);  // work of paths [0, P)
  for (std::size_t P = 0; P < n; ++P)
    prefix[P + 1] = prefix[P] + 2LL * (d.paths[P].entry_end - d.paths[P].entry_begin) + d.paths[P].d3;
  // best[k][P]: the least largest work of paths [0, P) in k groups; cut[k][P]: where its last group starts.
  constexpr long long kNone = std::numeric_limits<long long>::max();
  std::vector<std::vector<long long>> best(groups + 1, std::vector<long long>(n + 1, kNone));
  std::vector<std::vector<std::size_t>> cut(groups + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0;
  for (std::size_t k = 1; k <= groups; ++k)
    for (std::size_t P = k; P <= n; ++P)
      for (std::size_t c = k - 1; c < P; ++c) {
        if (best[k - 1][c] == kNone) continue;
        const long long w = std::max(best[k - 1][c], prefix[P] - prefix[c]);
        if (w < best[k][P]) best[k][P] = w, cut[k][P] = c;
      }
  std::vector<std::pair<std::size_t, std::size_t>> out(groups);
  for (std::size_t k = groups, P = n; k > 0; P = cut[k][P], --k) out[k - 1] = {cut[k][P], P};
  return out;
}

// One group's part of the forward kernel (paths [first, last)): accumulators, the edge loop, stores.
void emit_forward_group(std::ostringstream& s, const ConvTPDescriptor& d, const std::map<int, int>& blocks,
                        std::size_t first, std::size_t last) {
  std::vector<const ConvTPPathDescriptor*> paths;
  for (std::size_t P = first; P < last; ++P) paths.push_back(&d.paths[P]);
  for (std::size_t P = first; P < last; ++P)
    for (int m = 0; m < d.paths[P].d3; ++m) s << "  double " << pname("a", P, m) << " = 0.0;\n";
  s << "  for (long long e = e0; e < e1;) {\n"
    << "    const long long eb = e + " << kForwardEdgeBlock << " < e1 ? e + " << kForwardEdgeBlock << " : e1;\n";
  for (std::size_t P = first; P < last; ++P)
    for (int m = 0; m < d.paths[P].d3; ++m) s << "    T " << pname("b", P, m) << " = T(0);\n";
  s << "    for (; e < eb; ++e) {\n";
  std::ostringstream body;
  emit_edge_loads(body, d, blocks, paths);
  for (std::size_t P = first; P < last; ++P) {
    const ConvTPPathDescriptor& p = d.paths[P];
    body << "    {\n      const T r = re[" << p.w_offset << "];\n";
    for (int m3 = 0; m3 < p.d3; ++m3) {
      std::string sum;
      for (int i = p.entry_begin; i < p.entry_end; ++i) {
        const ConvTPW3jEntry& en = d.entries[i];
        if (en.m3 != m3) continue;
        sum += (sum.empty() ? "" : " + ") + cuda_literal(p.alpha * en.c) + " * " + xname(blocks, p, en.m1) + " * " +
               yname(p, en.m2);
      }
      if (!sum.empty()) body << "      " << pname("b", P, m3) << " += r * (" << sum << ");\n";
    }
    body << "    }\n";
  }
  // The edge loop's body, indented one level deeper.
  std::istringstream lines(body.str());
  for (std::string line; std::getline(lines, line);) s << "  " << line << "\n";
  s << "    }\n";
  for (std::size_t P = first; P < last; ++P)
    for (int m = 0; m < d.paths[P].d3; ++m)
      s << "    " << pname("a", P, m) << " += (double)" << pname("b", P, m) << ";\n";
  s << "  }\n"
    << "  if (splits == 1) {\n"
    << "    T* __restrict__ o = agg + row * " << d.dim_mid << "LL;\n";
  for (std::size_t P = first; P < last; ++P)
    for (int m = 0; m < d.paths[P].d3; ++m)
      s << "    o[" << mid_column(d, d.paths[P], m) << "] = (T)" << pname("a", P, m) << ";\n";
  s << "  } else {\n"
    << "    double* __restrict__ o = part + (split * nrows + row) * " << d.dim_mid << "LL;\n";
  for (std::size_t P = first; P < last; ++P)
    for (int m = 0; m < d.paths[P].d3; ++m)
      s << "    o[" << mid_column(d, d.paths[P], m) << "] = " << pname("a", P, m) << ";\n";
  s << "  }\n";
}

void emit_forward(std::ostringstream& s, const ConvTPDescriptor& d, const std::map<int, int>& blocks) {
  // A row's sum runs over all its edges, so it accumulates in double for both dtypes (mace_spec.md's
  // float32 runs keep long sums in float64): each product is formed in T, summed in T over blocks of
  // kForwardEdgeBlock edges (bP_m), and each block's partial sum added in double (aP_m). Converting
  // every term to double would cost one float->double conversion per term, a pipe 8x narrower than
  // the FMAs on sm_90: it made the float32 kernel conversion-bound.
  // With splits > 1 (few rows: more threads in flight), `splits` threads share a row's channel,
  // each summing one contiguous part of its edges into part[split] (double); tp_forward_join adds
  // the parts in split order (deterministic). With one split the row's sum goes straight to agg.
  // The paths are dealt to thread groups (a warp's 32 channels are in one group): each thread
  // keeps only its group's sums in registers, so more warps fit on an SM to hide the edge loads'
  // latency, at the price of reading the edge's indices, x and Y once per group.
  const std::vector<std::pair<std::size_t, std::size_t>> groups = forward_path_groups(d);
  const long long G = static_cast<long long>(groups.size()), C = d.max_mul;
  s << "template <typename T>\n__device__ __forceinline__ void tp_forward(const T* __restrict__ x, "
       "const long long* __restrict__ xindex, const T* __restrict__ Y, const T* __restrict__ R, "
       "const long long* __restrict__ rindex, const long long* __restrict__ row_ptr, T* __restrict__ agg, "
       "double* __restrict__ part, long long nrows, int splits) {\n";
  s << "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    << "  if (tid >= nrows * splits * " << G * C << "LL) return;\n"
    << "  const long long row = tid / (" << G * C << "LL * splits);\n"
    << "  const int split = (int)((tid / " << G * C << ") % splits);\n"
    << "  const int group = (int)((tid / " << C << ") % " << G << ");\n"
    << "  const int u = (int)(tid % " << C << ");\n"
    << "  const long long b0 = row_ptr[row], n = row_ptr[row + 1] - b0;\n"
    << "  const long long e0 = b0 + n * split / splits, e1 = b0 + n * (split + 1) / splits;\n";
  for (std::size_t k = 0; k < groups.size(); ++k) {
    s << (k == 0 ? "  if (group == 0) {\n" : "  } else if (group == " + std::to_string(k) + ") {\n");
    std::ostringstream group;
    emit_forward_group(group, d, blocks, groups[k].first, groups[k].second);
    std::istringstream lines(group.str());
    for (std::string line; std::getline(lines, line);) s << "  " << line << "\n";
  }
  s << "  }\n}\n\n";
  s << "template <typename T>\n__device__ __forceinline__ void tp_forward_join(const double* __restrict__ part, "
       "T* __restrict__ agg, long long nrows, int splits) {\n"
    << "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    << "  const long long n = nrows * " << d.dim_mid << "LL;\n"
    << "  if (tid >= n) return;\n"
    << "  double s = 0.0;\n"
    << "  for (int k = 0; k < splits; ++k) s += part[k * n + tid];\n"
    << "  agg[tid] = (T)s;\n}\n\n";
}

// Sums v0..v(P-1) over the warp's 32 lanes; afterwards lane l holds the sum of component l % P in v0.
void emit_warp_reduce_scatter(std::ostringstream& s, int P, const std::string& indent) {
  s << indent << "const int lane = threadIdx.x & 31;\n";
  for (int half = P / 2; half >= 1; half /= 2) {
    s << indent << "{\n" << indent << "  const bool up = (lane & " << half << ") != 0;\n";
    for (int i = 0; i < half; ++i) {
      const std::string lo = "py" + std::to_string(i), hi = "py" + std::to_string(i + half);
      s << indent << "  { const T send = up ? " << lo << " : " << hi << "; const T keep = up ? " << hi << " : " << lo
        << "; " << lo << " = keep + __shfl_xor_sync(0xffffffffu, send, " << half << "); }\n";
    }
    s << indent << "}\n";
  }
  for (int offset = P; offset < 32; offset *= 2)
    s << indent << "py0 += __shfl_xor_sync(0xffffffffu, py0, " << offset << ");\n";
}

void emit_backward(std::ostringstream& s, const ConvTPDescriptor& d, const std::map<int, int>& blocks) {
  const int P = conv_tp_dy_padded(d), parts = conv_tp_dy_parts(d);
  // ByRow (a compile-time switch, so that the per-edge kernel keeps its plain stores): dR added
  // into the edge's radial row (conv_tp_kernels.h).
  s << "template <typename T, bool ByRow>\n__device__ __forceinline__ void tp_backward(const T* __restrict__ x, "
       "const long long* __restrict__ xindex, const T* __restrict__ Y, const T* __restrict__ R, "
       "const long long* __restrict__ rindex, const long long* __restrict__ row_ptr, const T* __restrict__ dagg, "
       "T* __restrict__ dR, "
       "T* __restrict__ dYp, T* __restrict__ dxe, long long nrows, int splits) {\n";
  // Each edge's outputs are its own (no sum over edges), so `splits` warps share a row's edges.
  s << "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    << "  if (tid >= nrows * splits * " << d.max_mul << "LL) return;\n"
    << "  const long long row = tid / (" << d.max_mul << "LL * splits);\n"
    << "  const int split = (int)((tid / " << d.max_mul << ") % splits);\n"
    << "  const int u = (int)(tid % " << d.max_mul << ");\n";
  s << "  const T* __restrict__ gr = dagg + row * " << d.dim_mid << "LL;\n";
  for (std::size_t Q = 0; Q < d.paths.size(); ++Q) {
    const ConvTPPathDescriptor& p = d.paths[Q];
    for (int m = 0; m < p.d3; ++m) s << "  const T " << pname("g", Q, m) << " = gr[" << mid_column(d, p, m) << "];\n";
  }
  s << "  const long long e1 = row_ptr[row + 1];\n"
    << "  for (long long e = row_ptr[row] + split; e < e1; e += splits) {\n";
  emit_edge_loads(s, d, blocks, all_paths(d));
  const std::map<int, const ConvTPPathDescriptor*> block_paths = input_block_paths(all_paths(d));
  for (const auto& [offset, p] : block_paths)
    for (int m = 0; m < p->d1; ++m) s << "    T dx" << blocks.at(offset) << "_" << m << " = T(0);\n";
  for (int k = 0; k < P; ++k) s << "    T py" << k << " = T(0);\n";
  // (per pair of reverse edges, their gradients summed into the shared row: conv_tp_kernels.h)
  s << "    T* __restrict__ dRe = dR + (ByRow ? rindex[e] : e) * " << d.weight_numel << "LL + u;\n";
  for (std::size_t Q = 0; Q < d.paths.size(); ++Q) {
    const ConvTPPathDescriptor& p = d.paths[Q];
    s << "    {\n      const T r = re[" << p.w_offset << "];\n      T dr = T(0);\n";
    for (int i = p.entry_begin; i < p.entry_end; ++i) {
      const ConvTPW3jEntry& en = d.entries[i];
      const std::string xv = xname(blocks, p, en.m1), yv = yname(p, en.m2);
      s << "      { const T cg = " << cuda_literal(p.alpha * en.c) << " * " << pname("g", Q, en.m3) << "; dr += cg * ("
        << xv << " * " << yv << "); const T rcg = r * cg; " << xname(blocks, p, en.m1, "dx") << " += rcg * " << yv
        << "; " << yname(p, en.m2, "py") << " += rcg * " << xv << "; }\n";
    }
    s << "      if (ByRow) atomicAdd(dRe + " << p.w_offset << ", dr); else dRe[" << p.w_offset << "] = dr;\n    }\n";
  }
  s << "    if (dxe) {\n      T* __restrict__ dxr = dxe + e * " << d.dim_in1 << "LL;\n";
  for (const auto& [offset, p] : block_paths)
    for (int m = 0; m < p->d1; ++m)
      s << "      dxr[" << column(d, offset, p->d1, p->x_place, m) << "] = dx" << blocks.at(offset) << "_" << m << ";\n";
  s << "    }\n    {\n";
  emit_warp_reduce_scatter(s, P, "      ");
  s << "      if (lane < " << P << ") dYp[(e * " << parts << "LL + (u >> 5)) * " << P << "LL + lane] = py0;\n"
    << "    }\n  }\n}\n\n";
}

void emit_reductions(std::ostringstream& s, const ConvTPDescriptor& d) {
  const int P = conv_tp_dy_padded(d), parts = conv_tp_dy_parts(d);
  s << "template <typename T>\n__device__ __forceinline__ void tp_dy_reduce(const T* __restrict__ dYp, "
       "T* __restrict__ dY, long long E) {\n"
    << "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    << "  if (tid >= E * " << d.dim_sh << "LL) return;\n"
    << "  const long long e = tid / " << d.dim_sh << ";\n"
    << "  const int m = (int)(tid % " << d.dim_sh << ");\n"
    << "  T s = T(0);\n"
    << "  for (int w = 0; w < " << parts << "; ++w) s += dYp[(e * " << parts << "LL + w) * " << P << "LL + m];\n"
    << "  dY[tid] = s;\n}\n\n";
  s << "template <typename T>\n__device__ __forceinline__ void tp_dx_gather(const T* __restrict__ dxe, "
       "const long long* __restrict__ x_perm, const long long* __restrict__ x_ptr, "
       "const long long* __restrict__ x_rows, T* __restrict__ dx, long long num_rows) {\n"
    << "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    << "  if (tid >= num_rows * " << d.dim_in1 << "LL) return;\n"
    << "  const long long r = tid / " << d.dim_in1 << ";\n"
    << "  const int col = (int)(tid % " << d.dim_in1 << ");\n"
    << "  double s = 0.0;\n"
    << "  for (long long j = x_ptr[r]; j < x_ptr[r + 1]; ++j) s += (double)dxe[x_perm[j] * " << d.dim_in1
    << "LL + col];\n"
    << "  dx[(x_rows ? x_rows[r] : r) * " << d.dim_in1 << "LL + col] += (T)s;\n}\n\n";
}

}  // namespace

int conv_tp_dy_parts(const ConvTPDescriptor& d) { return d.max_mul / 32; }
int conv_tp_dy_padded(const ConvTPDescriptor& d) { return next_power_of_two(d.dim_sh); }

int conv_tp_forward_groups(const ConvTPDescriptor& d) {
  const int groups = (mid_per_channel(d) + kForwardMidPerGroup - 1) / kForwardMidPerGroup;
  return std::max(1, std::min(groups, static_cast<int>(d.paths.size())));
}

std::string conv_tp_specialization_unsupported(const ConvTPDescriptor& d) {
  if (d.paths.empty()) return "the layer has no tensor-product paths";
  for (const ConvTPPathDescriptor& p : d.paths)
    if (p.mul != d.max_mul) return "paths of different multiplicities";
  if (d.max_mul % 32 != 0) return "channel count " + std::to_string(d.max_mul) + " is not a multiple of 32";
  if (d.dim_sh > 32) return "more than 32 spherical-harmonic components";
  if (mid_per_channel(d) > kMaxMidPerChannel)
    return std::to_string(mid_per_channel(d)) + " message components per channel (at most " +
           std::to_string(kMaxMidPerChannel) + ")";
  return "";
}

std::string generate_conv_tp_cuda_source(const ConvTPDescriptor& d) {
  const std::map<int, int> blocks = input_blocks(d);
  std::ostringstream s;
  s << "// Generated by flashmace conv_tp_codegen.cpp: channelwise conv tensor product, " << d.paths.size()
    << " paths, " << d.max_mul << " channels, in " << d.dim_in1 << " sh " << d.dim_sh << " mid " << d.dim_mid
    << (d.ir_mul ? ", ir_mul" : ", mul_ir") << "\n";
  emit_forward(s, d, blocks);
  emit_backward(s, d, blocks);
  emit_reductions(s, d);
  const int threads = kConvTPSpecializedThreads;
  for (const char* t : {"float", "double"}) {
    const std::string f = std::string(t) == "float" ? "f32" : "f64", T(t);
    s << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") tp_forward_" << f << "(const " << T
      << "* x, const long long* xindex, const " << T << "* Y, const " << T
      << "* R, const long long* rindex, const long long* row_ptr, " << T
      << "* agg, double* part, long long nrows, int splits) { tp_forward<" << T
      << ">(x, xindex, Y, R, rindex, row_ptr, agg, part, nrows, splits); }\n";
    s << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") tp_forward_join_" << f
      << "(const double* part, " << T << "* agg, long long nrows, int splits) { tp_forward_join<" << T
      << ">(part, agg, nrows, splits); }\n";
    for (const char* rows : {"", "_rows"})
      s << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") tp_backward" << rows << "_" << f
        << "(const " << T << "* x, const long long* xindex, const " << T << "* Y, const " << T
        << "* R, const long long* rindex, const long long* row_ptr, const " << T << "* dagg, " << T << "* dR, " << T
        << "* dYp, " << T << "* dxe, long long nrows, int splits) { tp_backward<" << T << ", "
        << (*rows ? "true" : "false") << ">(x, xindex, Y, R, rindex, row_ptr, dagg, dR, dYp, dxe, nrows, splits); }\n";
    s << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") tp_dy_reduce_" << f << "(const " << T
      << "* dYp, " << T << "* dY, long long E) { tp_dy_reduce<" << T << ">(dYp, dY, E); }\n";
    s << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") tp_dx_gather_" << f << "(const " << T
      << "* dxe, const long long* x_perm, const long long* x_ptr, const long long* x_rows, " << T
      << "* dx, long long num_rows) { tp_dx_gather<" << T << ">(dxe, x_perm, x_ptr, x_rows, dx, num_rows); }\n";
  }
  return s.str();
}

}  // namespace flashmace
