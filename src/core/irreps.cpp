#include "core/irreps.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <numeric>
#include <sstream>

#include "core/error.h"

namespace flashmace {

std::string Irrep::str() const { return std::to_string(l) + (p == 1 ? "e" : "o"); }

namespace {

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

Irreps Irreps::parse(const std::string& text) {
  std::vector<MulIr> blocks;
  if (trim(text).empty()) return Irreps(blocks);  // as in e3nn: the empty irreps
  // getline drops a trailing empty field; e3nn rejects "16x0e+", so do we.
  if (trim(text).back() == '+') throw Error("Bad irreps string '" + text + "': trailing '+'");
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, '+')) {
    item = trim(item);
    const std::string bad = "Bad irreps string '" + text + "': cannot read '" + item + "'";
    if (item.empty()) throw Error(bad);
    MulIr b;
    b.mul = 1;
    std::string ir = item;
    const std::size_t x = item.find('x');
    if (x != std::string::npos) {
      const std::string mul = item.substr(0, x);
      if (!all_digits(mul)) throw Error(bad);
      b.mul = std::atoi(mul.c_str());
      ir = item.substr(x + 1);
    }
    if (ir.size() < 2 || (ir.back() != 'e' && ir.back() != 'o')) throw Error(bad);
    const std::string l = ir.substr(0, ir.size() - 1);
    if (!all_digits(l)) throw Error(bad);
    b.ir.l = std::atoi(l.c_str());
    b.ir.p = ir.back() == 'e' ? 1 : -1;
    blocks.push_back(b);
  }
  return Irreps(blocks);
}

Irreps Irreps::spherical_harmonics(int lmax) {
  std::vector<MulIr> blocks;
  for (int l = 0; l <= lmax; ++l) blocks.push_back({1, {l, l % 2 == 0 ? 1 : -1}});
  return Irreps(blocks);
}

Irreps Irreps::scalars(int mul) { return Irreps(std::vector<MulIr>{{mul, {0, 1}}}); }

int Irreps::dim() const {
  return std::accumulate(blocks_.begin(), blocks_.end(), 0, [](int s, const MulIr& b) { return s + b.dim(); });
}

int Irreps::offset(std::size_t block) const {
  int o = 0;
  for (std::size_t i = 0; i < block; ++i) o += blocks_[i].dim();
  return o;
}

int Irreps::lmax() const {
  int l = 0;
  for (const auto& b : blocks_) l = std::max(l, b.ir.l);
  return l;
}

bool Irreps::contains(const Irrep& ir) const {
  return std::any_of(blocks_.begin(), blocks_.end(), [&](const MulIr& b) { return b.ir == ir; });
}

std::string Irreps::str() const {
  std::string s;
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    if (i) s += "+";
    s += std::to_string(blocks_[i].mul) + "x" + blocks_[i].ir.str();
  }
  return s;
}

Irreps Irreps::sort() const {
  std::vector<MulIr> b = blocks_;
  std::stable_sort(b.begin(), b.end(), [](const MulIr& x, const MulIr& y) { return x.ir < y.ir; });
  return Irreps(b);
}

Irreps Irreps::simplify() const {
  std::vector<MulIr> out;
  for (const auto& b : blocks_) {
    if (!out.empty() && out.back().ir == b.ir)
      out.back().mul += b.mul;
    else
      out.push_back(b);
  }
  return Irreps(out);
}

IrMulPlace ir_mul_place(const Irreps& irreps, std::size_t block) {
  std::size_t first = block;
  while (first > 0 && irreps[first - 1].ir == irreps[block].ir) --first;
  IrMulPlace p;
  p.run_offset = irreps.offset(first);
  for (std::size_t i = first; i < block; ++i) p.channel_offset += irreps[i].mul;
  for (std::size_t i = first; i < irreps.size() && irreps[i].ir == irreps[block].ir; ++i) p.run_mul += irreps[i].mul;
  return p;
}

bool ir_mul_runs_span_blocks(const Irreps& irreps) {
  for (std::size_t i = 1; i < irreps.size(); ++i)
    if (irreps[i].ir == irreps[i - 1].ir && irreps[i].ir.l > 0) return true;
  return false;
}

std::vector<int> ir_mul_columns(const Irreps& irreps) {
  std::vector<int> columns;
  for (std::size_t i = 0; i < irreps.size(); ++i) {
    const IrMulPlace p = ir_mul_place(irreps, i);
    const int d = irreps[i].ir.dim();
    for (int u = 0; u < irreps[i].mul; ++u)
      for (int m = 0; m < d; ++m) columns.push_back(p.run_offset + m * p.run_mul + p.channel_offset + u);
  }
  return columns;
}

Irreps Irreps::operator*(int mul) const {
  std::vector<MulIr> b = blocks_;
  for (auto& x : b) x.mul *= mul;
  return Irreps(b);
}

ConvTPLayout conv_tp_layout(const Irreps& in1, const Irreps& sh, const Irreps& target) {
  std::vector<MulIr> unsorted;
  std::vector<ConvTPPath> paths;
  for (std::size_t i = 0; i < in1.size(); ++i) {
    for (std::size_t j = 0; j < sh.size(); ++j) {
      const Irrep a = in1[i].ir, b = sh[j].ir;
      for (int l = std::abs(a.l - b.l); l <= a.l + b.l; ++l) {
        const Irrep out{l, a.p * b.p};
        if (!target.contains(out)) continue;
        paths.push_back({static_cast<int>(i), static_cast<int>(j), static_cast<int>(unsorted.size())});
        unsorted.push_back({in1[i].mul, out});
      }
    }
  }
  std::vector<int> order(unsorted.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return unsorted[x].ir < unsorted[y].ir; });
  std::vector<int> new_index(order.size());
  std::vector<MulIr> mid;
  for (std::size_t n = 0; n < order.size(); ++n) {
    new_index[order[n]] = static_cast<int>(n);
    mid.push_back(unsorted[order[n]]);
  }
  ConvTPLayout layout;
  layout.mid = Irreps(mid);
  for (auto p : paths) {
    p.k = new_index[p.k];
    layout.paths.push_back(p);
  }
  std::stable_sort(layout.paths.begin(), layout.paths.end(),
                   [](const ConvTPPath& x, const ConvTPPath& y) { return x.k < y.k; });
  for (const auto& p : layout.paths) layout.weight_numel += in1[p.i1].mul;
  return layout;
}

}  // namespace flashmace
