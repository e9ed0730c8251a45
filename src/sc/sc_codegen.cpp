// Generates the specialised SC kernels (sc_codegen.h). One thread per (atom i, channel c); the
// monomials form a tree (parent = the monomial without its last factor), and the kernels walk it
// depth first, so only the values on the current root-to-leaf path (at most nu_max) are live, next
// to a_k = A[i, base_k + stride_k * c] (the atom's mul_ir row, sc_input_columns), one accumulator
// per (block, m, path) and, in the backward, da_k (written back to the same column of dA):
//   forward:  v_j = v_parent(j) * a_last(j);  s[o,m,P] += coeff * v_j         (pre-order)
//             B[i, off_o + c*(2l+1) + m] = sum_P W[z_i, P, c] * s[o,m,P]
//   backward: gm[o,m,P] = W[z_i, P, c] * dB[i, off_o + c*(2l+1) + m]
//             g_j = sum_terms coeff * gm + sum_children g_child * a_last(child)   (post-order)
//             da_last(j) += g_j * v_parent(j)
// Output is plain ASCII with shortest round-trip literals (std::to_chars: locale-independent), so
// equal descriptors give equal bytes and therefore equal cache keys.
#include "sc/sc_codegen.h"

#include <charconv>
#include <sstream>

namespace flashmace {

namespace {

// Names of the per-(block, m, path) values: forward accumulators s_o_m_P, backward gm_o_m_P.
std::string slot(const char* prefix, std::size_t o, int m, int path) {
  return std::string(prefix) + std::to_string(o) + "_" + std::to_string(m) + "_" + std::to_string(path);
}

struct TermRef {
  std::size_t block;
  const ScTerm* term;
};

// The monomial tree with each monomial's terms from every block.
struct Tree {
  std::vector<std::vector<int>> children;
  std::vector<int> roots;
  std::vector<std::vector<TermRef>> terms;
};

Tree make_tree(const ScDescriptor& d) {
  Tree t;
  t.children.resize(d.monomials.size());
  t.terms.resize(d.monomials.size());
  for (std::size_t j = 0; j < d.monomials.size(); ++j) {
    const int parent = d.monomials[j].parent;
    (parent < 0 ? t.roots : t.children[parent]).push_back(static_cast<int>(j));
  }
  for (std::size_t o = 0; o < d.blocks.size(); ++o)
    for (const ScTerm& term : d.blocks[o].terms) t.terms[term.mono].push_back({o, &term});
  return t;
}

void emit_prologue(std::ostringstream& s, const ScDescriptor& d) {
  s << "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    << "  if (tid >= n * " << d.channels << "LL) return;\n"
    << "  const long long i = tid / " << d.channels << ";\n"
    << "  const int c = (int)(tid % " << d.channels << ");\n"
    << "  const long long z = species[i];\n";
}

// The atom's row of A in mul_ir (sc_input_columns): component k of channel c at base[k] + stride[k] c.
std::string input_column(const ScInputColumns& in, int k) {
  return std::to_string(in.base[static_cast<std::size_t>(k)]) + " + " + std::to_string(in.stride[static_cast<std::size_t>(k)]) +
         " * c";
}

void emit_inputs(std::ostringstream& s, const ScDescriptor& d) {
  const ScInputColumns in = sc_input_columns(d);
  s << "  const T* __restrict__ a_in = A + i * " << static_cast<long long>(d.channels) * d.num_components << "LL;\n";
  for (int k = 0; k < d.num_components; ++k) s << "  const T a" << k << " = a_in[" << input_column(in, k) << "];\n";
  s << "  const T* __restrict__ w = W + z * " << static_cast<long long>(packed_weight_paths(d)) * d.channels
    << "LL + c;\n";
}

std::string indent(int depth) { return std::string(2 * (depth + 1), ' '); }

// v<depth>: the value of the monomial at this depth of the walk.
void emit_value(std::ostringstream& s, const ScDescriptor& d, int j, int depth) {
  const ScMonomial& m = d.monomials[j];
  s << indent(depth + 1) << "const T v" << depth << " = ";
  if (depth == 0)
    s << "a" << m.last << ";\n";
  else
    s << "v" << depth - 1 << " * a" << m.last << ";\n";
}

void emit_forward_walk(std::ostringstream& s, const ScDescriptor& d, const Tree& t, int j, int depth) {
  s << indent(depth) << "{\n";
  emit_value(s, d, j, depth);
  for (const TermRef& r : t.terms[j])
    s << indent(depth + 1) << slot("s", r.block, r.term->m, r.term->path) << " += " << cuda_literal(r.term->coeff) << " * v"
      << depth << ";\n";
  for (int child : t.children[j]) emit_forward_walk(s, d, t, child, depth + 1);
  s << indent(depth) << "}\n";
}

void emit_backward_walk(std::ostringstream& s, const ScDescriptor& d, const Tree& t, int j, int depth) {
  const ScMonomial& m = d.monomials[j];
  s << indent(depth) << "{\n";
  if (!t.children[j].empty()) emit_value(s, d, j, depth);
  s << indent(depth + 1) << "T g" << depth << " = T(0);\n";
  for (const TermRef& r : t.terms[j])
    s << indent(depth + 1) << "g" << depth << " += " << cuda_literal(r.term->coeff) << " * "
      << slot("gm", r.block, r.term->m, r.term->path) << ";\n";
  for (int child : t.children[j]) emit_backward_walk(s, d, t, child, depth + 1);
  if (depth == 0) {
    s << indent(depth + 1) << "da" << m.last << " += g0;\n";
  } else {
    s << indent(depth + 1) << "da" << m.last << " += g" << depth << " * v" << depth - 1 << ";\n"
      << indent(depth + 1) << "g" << depth - 1 << " += g" << depth << " * a" << m.last << ";\n";
  }
  s << indent(depth) << "}\n";
}

}  // namespace

std::string cuda_literal(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // an integer would be an int literal
  return "T(" + s + ")";
}

int packed_weight_paths(const ScDescriptor& d) {
  int p = 0;
  for (const ScBlock& b : d.blocks) p += b.total_paths;
  return p;
}

template <typename T>
std::vector<T> pack_sc_weights(const ScDescriptor& d) {
  const int PW = packed_weight_paths(d), C = d.channels;
  std::vector<T> w(static_cast<std::size_t>(d.num_elements) * PW * C);
  for (int z = 0; z < d.num_elements; ++z) {
    int offset = 0;
    for (const ScBlock& b : d.blocks) {
      for (std::size_t q = 0; q < static_cast<std::size_t>(b.total_paths) * C; ++q)
        w[(static_cast<std::size_t>(z) * PW + offset) * C + q] =
            static_cast<T>(b.weights[static_cast<std::size_t>(z) * b.total_paths * C + q]);
      offset += b.total_paths;
    }
  }
  return w;
}
template std::vector<float> pack_sc_weights<float>(const ScDescriptor&);
template std::vector<double> pack_sc_weights<double>(const ScDescriptor&);

std::string generate_sc_cuda_source(const ScDescriptor& d) {
  const Tree tree = make_tree(d);
  std::ostringstream s;
  s << "// Generated by flashmace sc_codegen.cpp: symmetric contraction of product layer " << d.layer << "\n"
    << "// K=" << d.num_components << " C=" << d.channels << " Z=" << d.num_elements << " correlation=" << d.correlation
    << " monomials=" << d.monomials.size() << " terms=" << d.num_terms() << "\n";

  // Forward.
  s << "template <typename T>\n__device__ __forceinline__ void sc_forward(const T* __restrict__ A, "
       "const long long* __restrict__ species, const T* __restrict__ W, T* __restrict__ B, long long n) {\n";
  emit_prologue(s, d);
  // b_out + (off + c*(2l+1) + m) - c: the column of (c, m) in block o.
  s << "  T* __restrict__ b_out = B + i * " << d.out_dim << "LL + c;\n"
    << "  if (z < 0 || z >= " << d.num_elements << ") {\n";
  for (const ScBlock& b : d.blocks)
    s << "    for (int m = 0; m < " << b.dim() << "; ++m) b_out[" << b.out_offset << " + " << (b.dim() - 1)
      << " * c + m] = T(0) / T(0);\n";
  s << "    return;\n  }\n";
  emit_inputs(s, d);
  for (std::size_t o = 0; o < d.blocks.size(); ++o)
    for (int m = 0; m < d.blocks[o].dim(); ++m)
      for (int p = 0; p < d.blocks[o].total_paths; ++p) s << "  T " << slot("s", o, m, p) << " = T(0);\n";
  for (int root : tree.roots) emit_forward_walk(s, d, tree, root, 0);
  int offset = 0;
  for (std::size_t o = 0; o < d.blocks.size(); ++o) {
    const ScBlock& b = d.blocks[o];
    for (int m = 0; m < b.dim(); ++m) {
      s << "  b_out[" << b.out_offset << " + " << (b.dim() - 1) << " * c + " << m << "] = ";
      for (int p = 0; p < b.total_paths; ++p)
        s << (p ? " + " : "") << "w[" << (offset + p) * d.channels << "] * " << slot("s", o, m, p);
      s << (b.total_paths ? ";\n" : "T(0);\n");
    }
    offset += b.total_paths;
  }
  s << "}\n\n";

  // Backward.
  s << "template <typename T>\n__device__ __forceinline__ void sc_backward(const T* __restrict__ A, "
       "const long long* __restrict__ species, const T* __restrict__ W, const T* __restrict__ dB, "
       "T* __restrict__ dA, long long n) {\n";
  emit_prologue(s, d);
  const ScInputColumns in = sc_input_columns(d);
  s << "  T* __restrict__ da_out = dA + i * " << static_cast<long long>(d.channels) * d.num_components << "LL;\n"
    << "  if (z < 0 || z >= " << d.num_elements << ") {\n";
  for (int k = 0; k < d.num_components; ++k) s << "    da_out[" << input_column(in, k) << "] = T(0) / T(0);\n";
  s << "    return;\n  }\n";
  emit_inputs(s, d);
  s << "  const T* __restrict__ db_in = dB + i * " << d.out_dim << "LL + c;\n";
  offset = 0;
  for (std::size_t o = 0; o < d.blocks.size(); ++o) {
    const ScBlock& b = d.blocks[o];
    for (int m = 0; m < b.dim(); ++m) {
      s << "  const T db" << o << "_" << m << " = db_in[" << b.out_offset << " + " << (b.dim() - 1) << " * c + " << m
        << "];\n";
      for (int p = 0; p < b.total_paths; ++p)
        s << "  const T " << slot("gm", o, m, p) << " = w[" << (offset + p) * d.channels << "] * db" << o << "_" << m
          << ";\n";
    }
    offset += b.total_paths;
  }
  for (int k = 0; k < d.num_components; ++k) s << "  T da" << k << " = T(0);\n";
  for (int root : tree.roots) emit_backward_walk(s, d, tree, root, 0);
  for (int k = 0; k < d.num_components; ++k) s << "  da_out[" << input_column(in, k) << "] = da" << k << ";\n";
  s << "}\n\n";

  for (const char* t : {"float", "double"}) {
    const std::string suffix = std::string(t) == "float" ? "f32" : "f64";
    s << "extern \"C\" __global__ void __launch_bounds__(" << kScThreadsPerBlock << ") sc_forward_" << suffix
      << "(const " << t << "* A, const long long* species, const " << t << "* W, " << t
      << "* B, long long n) { sc_forward<" << t << ">(A, species, W, B, n); }\n";
    s << "extern \"C\" __global__ void __launch_bounds__(" << kScThreadsPerBlock << ") sc_backward_" << suffix
      << "(const " << t << "* A, const long long* species, const " << t << "* W, const " << t << "* dB, " << t
      << "* dA, long long n) { sc_backward<" << t << ">(A, species, W, dB, dA, n); }\n";
  }
  return s.str();
}

}  // namespace flashmace
