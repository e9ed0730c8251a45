#pragma once
// The skin list's per-step compaction (engine/step/skin_list.h) on CUDA: the same outputs as its
// ATen formulation, integer for integer and bit for bit, in three kernels and one in-place
// exclusive scan (CUB) instead of ~80 tensor operations.
//   1. per listed edge: its vector, whether its radial pair is within the cutoff (the mask, written
//      in receiver order, in sender order and, by a pair's first edge, per pair row), the closest
//      squared length (an atomic), and the non-finite position components;
//   2. one scan over the three masks side by side: each becomes the exclusive positions of its
//      edges (rows), offset by the sums of the masks before it;
//   3. per listed edge within the cutoff: its slot in the bucket (its receiver-order position plus
//      the padding of the rows before), and everything a step reads there (vector, atoms, elements,
//      pair row, sender order); a pair's first edge writes its row;
//   4. per atom: row pointers and counts in both orders, the padding edges at the end of its row,
//      the pair rows past the used ones, and (one thread) the status, resetting the two words.
// When the edges or rows outgrow the buckets, every index written stays in bounds (a step replayed
// on them reads garbage, never out of bounds) and the status says so.
// A list cut into blocks of receiver rows (skin_list.h) runs one pass per block: its listed edges,
// rows row0 .. row0 + N - 1 and its own bucket (an edge chunk), the later blocks adding into the
// status; the per-atom sums' order over all chunks (receiver_ptr, sender_perm[1], ...) is then the
// caller's.
// Torch-free: device pointers and a cudaStream_t.
#include <cstddef>
#include <cstdint>

namespace flashmace {

// T: the model's dtype (the pair shares).
template <typename T>
struct SkinCompaction {
  // The list: F edges in receiver order over N owned rows (atoms row0 .. row0 + N - 1; rows are
  // counted from row0); A padded atoms; a bucket of B edges.
  int64_t F = 0, N = 0, A = 0, B = 0, ntotal = 0, row0 = 0;
  double cutoff2 = 0;  // r_max^2
  double far = 0;      // the x component of a padding edge's vector (beyond every cutoff)
  const double* positions = nullptr;        // [ntotal, 3]
  const double* shift = nullptr;            // [F, 3] image . cell
  const int64_t* receiver = nullptr;        // [F]
  const int64_t* sender = nullptr;          // [F]
  const int64_t* row_ptr = nullptr;         // [N + 1] from 0
  const int64_t* sender_rank = nullptr;     // [F] each edge's place in the sender order (null: no sender order)
  const int64_t* sender_row_ptr = nullptr;  // [A + 1] over the sender order
  const int64_t* z_node = nullptr;          // [ntotal] atomic numbers
  const int64_t* slot_node = nullptr;       // [ntotal] element slots
  // The radial pairing of the listed edges (pair_index null: none): `rows` rows, `bucket_rows` kept.
  int64_t rows = 0, bucket_rows = 0;
  const int64_t* pair_index = nullptr;   // [F]
  const int64_t* pair_first = nullptr;   // [rows]
  const int64_t* pair_second = nullptr;  // [rows]
  const T* pair_share = nullptr;         // [F]
  // Scratch: the scans (in place) [F + 1], [F + 1] (with a sender order), [rows + 1] (with pairs),
  // consecutive in that order from edge_scan (one scan runs over them all); CUB's temporary storage
  // (skin_compaction_scan_bytes); two words, zero before a call and left zero by it.
  int64_t* edge_scan = nullptr;
  int64_t* sender_scan = nullptr;
  int64_t* row_scan = nullptr;
  void* scan_temp = nullptr;
  std::size_t scan_temp_bytes = 0;
  unsigned long long* words = nullptr;  // [2]: the closest length's bits, complemented (0: none); non-finite count
  // Outputs [B] unless said (null: not wanted).
  double* vectors = nullptr;  // [B, 3]
  int64_t* out_sender = nullptr;
  int64_t* out_receiver = nullptr;
  int64_t* z_sender = nullptr;  // (both null: the topology holds no atomic numbers)
  int64_t* z_receiver = nullptr;
  int64_t* sender_slot = nullptr;
  int64_t* chunk_rows = nullptr;     // the row (from row0)
  int64_t* chunk_row_ptr = nullptr;  // [N + 1]
  int64_t* sender_perm[2] = {nullptr, nullptr};     // the sender order (chunk CSR, atom sums)
  int64_t* sender_ptr_out[2] = {nullptr, nullptr};  // [A + 1]
  int64_t* sender_counts = nullptr;                 // [A]
  int64_t* receiver_ptr = nullptr;                  // [A + 1]
  int64_t* receiver_counts = nullptr;               // [A]
  int64_t* pair_index_out = nullptr;
  int64_t* pair_first_out = nullptr;   // [bucket_rows]
  int64_t* pair_second_out = nullptr;  // [bucket_rows]
  T* pair_share_out = nullptr;
  double* status = nullptr;  // [3]: overflow, closest squared length within the cutoff, non-finite components
  bool status_adds = false;  // combine with the status there (a later block) instead of writing it
};

// CUB's temporary bytes for in-place exclusive scans of up to `items` int64 values.
std::size_t skin_compaction_scan_bytes(int64_t items);

template <typename T>
void skin_compaction_cuda(const SkinCompaction<T>& c, void* stream);

}  // namespace flashmace
