#include "sc/sc_generic_tables.h"

#include <algorithm>
#include <map>

#include "sc/sc_codegen.h"

namespace flashmace::sc_detail {

std::string generic_unsupported(const ScDescriptor& d) {
  if (d.correlation > kGenericMaxDegree || d.num_components > 255)
    return "the generic CUDA executor handles correlation <= 4 and at most 255 components per channel";
  for (const ScBlock& b : d.blocks)
    if (b.dim() > kGenericMaxDim) return "the generic CUDA executor handles output irreps up to l = 15";
  return "";
}

template <typename T>
GenericHostTables<T> build_generic_tables(const ScDescriptor& d) {
  GenericHostTables<T> t;
  t.K = d.num_components;
  t.C = d.channels;
  t.Z = d.num_elements;
  t.PW = packed_weight_paths(d);
  t.out_dim = d.out_dim;
  t.W = pack_sc_weights<T>(d);
  const ScInputColumns in = sc_input_columns(d);
  t.in_base.assign(in.base.begin(), in.base.end());
  t.in_stride.assign(in.stride.begin(), in.stride.end());
  int path_offset = 0;
  for (const ScBlock& blk : d.blocks) {
    t.max_dim = std::max(t.max_dim, blk.dim());
    std::map<std::pair<int, int>, std::vector<const ScTerm*>> groups;  // (path, m) order
    for (const ScTerm& term : blk.terms) groups[{term.path, term.m}].push_back(&term);
    GenericBlock info{blk.dim(), blk.out_offset, static_cast<int>(t.term_k.size()), 0};
    for (const auto& [key, terms] : groups)
      for (const ScTerm* term : terms) {
        unsigned packed = 0xffffffffu;
        const auto& k = d.monomials[term->mono].k;
        for (std::size_t q = 0; q < k.size(); ++q)
          packed = (packed & ~(0xffu << (8 * q))) | (static_cast<unsigned>(k[q]) << (8 * q));
        t.term_k.push_back(packed);
        t.term_pm.push_back(((path_offset + key.first) << 5) | key.second);
        t.term_coeff.push_back(static_cast<T>(term->coeff));
      }
    info.term_end = static_cast<int>(t.term_k.size());
    t.blocks.push_back(info);
    path_offset += blk.total_paths;
  }
  return t;
}

template GenericHostTables<float> build_generic_tables<float>(const ScDescriptor&);
template GenericHostTables<double> build_generic_tables<double>(const ScDescriptor&);

}  // namespace flashmace::sc_detail
