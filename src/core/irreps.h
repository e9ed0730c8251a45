#pragma once
// e3nn's irreps vocabulary (mace_spec.md 1): "16x0e+16x1o" is a list of (mul, l, parity) blocks
// stored in mul_ir layout, block after block, multiplicity-major inside a block.
#include <string>
#include <vector>

namespace flashmace {

struct Irrep {
  int l = 0;
  int p = 1;  // +1 even ("e"), -1 odd ("o")
  int dim() const { return 2 * l + 1; }
  bool operator==(const Irrep& o) const { return l == o.l && p == o.p; }
  bool operator!=(const Irrep& o) const { return !(*this == o); }
  // e3nn orders irreps as the tuple (l, p), so 0o < 0e < 1o < 1e < ...
  bool operator<(const Irrep& o) const { return l != o.l ? l < o.l : p < o.p; }
  std::string str() const;
};

struct MulIr {
  int mul = 0;
  Irrep ir;
  int dim() const { return mul * ir.dim(); }
};

class Irreps {
 public:
  Irreps() = default;
  explicit Irreps(std::vector<MulIr> blocks) : blocks_(std::move(blocks)) {}
  static Irreps parse(const std::string& text);  // throws flashmace::Error on bad syntax
  static Irreps spherical_harmonics(int lmax);   // 1x0e+1x1o+1x2e+...
  static Irreps scalars(int mul);                // mul x 0e

  const std::vector<MulIr>& blocks() const { return blocks_; }
  std::size_t size() const { return blocks_.size(); }
  const MulIr& operator[](std::size_t i) const { return blocks_[i]; }
  int dim() const;
  int offset(std::size_t block) const;  // start of a block in the flat feature vector
  int lmax() const;
  bool contains(const Irrep& ir) const;
  std::string str() const;

  Irreps sort() const;              // stable sort by irrep, like e3nn's Irreps.sort().irreps
  Irreps simplify() const;          // merge adjacent equal irreps, never reorder
  Irreps operator*(int mul) const;  // every multiplicity times mul

 private:
  std::vector<MulIr> blocks_;
};

// One "uvu" path of MACE's conv tensor product (mace_spec.md 6): input-1 block i1, spherical
// harmonics block i2, output block k of irreps_mid. Paths are sorted by k.
struct ConvTPPath {
  int i1 = 0;
  int i2 = 0;
  int k = 0;
};

struct ConvTPLayout {
  Irreps mid;  // sorted by irrep, not simplified
  std::vector<ConvTPPath> paths;
  int weight_numel = 0;  // sum of mul over paths (one radial weight per channel and path)
};

// MACE's tp_out_irreps_with_instructions(irreps1, sh_irreps, target).
ConvTPLayout conv_tp_layout(const Irreps& in1, const Irreps& sh, const Irreps& target);

// The fast engine's other column layout, ir_mul: each run of adjacent blocks of one irrep (a block
// of simplify()) keeps component m of all its channels side by side, so component m of the run's
// channel u sits at run offset + m * run mul + u (in mul_ir at run offset + u * (2l + 1) + m). A
// linear reads such a run as one strided [n, run mul] matrix per component; scalars are the same in
// both layouts.
struct IrMulPlace {
  int run_offset = 0;      // first column of the block's run
  int run_mul = 0;         // channels of the run
  int channel_offset = 0;  // the block's first channel within the run
};
IrMulPlace ir_mul_place(const Irreps& irreps, std::size_t block);
// [dim]: the ir_mul column of each mul_ir column.
std::vector<int> ir_mul_columns(const Irreps& irreps);
// Whether a run holds several blocks of an irrep with l > 0: then a block's channels are not
// contiguous in ir_mul, so whoever writes block by block cannot write that layout.
bool ir_mul_runs_span_blocks(const Irreps& irreps);

}  // namespace flashmace
