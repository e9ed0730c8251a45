#pragma once
// NVRTC compilation of generated CUDA source to a CUBIN, through an on-disk cache. NVRTC is
// loaded at run time (dlopen), so nothing here needs the CUDA toolkit to build or a GPU to run.
// Used by every load-time specialised kernel family (the SC, the conv TP) through jit/module.h.
//
// Cache: one file per key, key = hash of (source, arch, NVRTC version). Each file repeats the arch,
// the NVRTC version and the full source, and checksums the CUBIN; an entry that does not match in
// every respect (damaged, truncated, hash collision, other NVRTC) is recompiled and rewritten,
// never used. Files are written to a temporary name and renamed, so concurrent processes never see
// half a file. Directory: $FLASHMACE_SC_CACHE (its name predates the conv TP kernels), else
// $XDG_CACHE_HOME/flashmace/sc, else ~/.cache/flashmace/sc; caching is skipped (with one log line)
// when it cannot be created.
//
// NVRTC library: $FLASHMACE_NVRTC_LIBRARY if set (tests point it at a missing file), else the one
// CMake found, else libnvrtc.so.13 / .12 / libnvrtc.so from the loader path.
#include <string>
#include <vector>

namespace flashmace {

// Which kernels are compiled and what runs instead when they cannot be, for the messages.
struct JitUse {
  std::string kernels;   // "the SC kernels"
  std::string fallback;  // "the symmetric contraction runs on the generic executor"
};

struct Cubin {
  std::vector<char> image;  // the CUBIN; empty when none could be produced
  bool from_cache = false;
  std::string error;        // why image is empty (NVRTC missing, compile log)
  explicit operator bool() const { return !image.empty(); }
};

// arch: "sm_90" etc. Never throws for NVRTC trouble: it logs (once) why, with use.fallback, and
// returns an empty Cubin so the caller falls back.
Cubin compile_cubin(const std::string& source, const std::string& arch, const JitUse& use);

std::string jit_cache_dir();                                                    // "" when no cache directory is usable
std::string jit_cache_path(const std::string& source, const std::string& arch);  // "" without NVRTC or cache
bool nvrtc_available(std::string* why_not = nullptr);

// Prints "flashmace: <message>" to stderr the first time a given message is logged in this process.
void jit_log_once(const std::string& message);

}  // namespace flashmace
