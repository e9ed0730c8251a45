#include "jit/nvrtc.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace flashmace {

namespace {

// The few NVRTC entry points we use, declared here so no CUDA header is needed (nvrtc.h: the
// result is an enum, 0 = NVRTC_SUCCESS; the program is an opaque pointer).
using nvrtcProgram = struct _nvrtcProgram*;
struct Nvrtc {
  int (*version)(int*, int*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*create_program)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile_program)(nvrtcProgram, int, const char* const*) = nullptr;
  int (*log_size)(nvrtcProgram, size_t*) = nullptr;
  int (*log)(nvrtcProgram, char*) = nullptr;
  int (*cubin_size)(nvrtcProgram, size_t*) = nullptr;
  int (*cubin)(nvrtcProgram, char*) = nullptr;
  int (*destroy_program)(nvrtcProgram*) = nullptr;
  std::string version_string;  // "13.0"
  std::string error;           // why it is unusable
  bool ok() const { return error.empty(); }
};

template <typename F>
bool bind(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

// Loaded per library path, so that tests can switch FLASHMACE_NVRTC_LIBRARY between calls.
const Nvrtc& nvrtc() {
  static std::mutex mutex;
  static std::map<std::string, Nvrtc> loaded;
  const char* env = std::getenv("FLASHMACE_NVRTC_LIBRARY");
  const std::string requested = env && *env ? env : "";
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(requested);
  if (it != loaded.end()) return it->second;
  Nvrtc& n = loaded[requested];
  std::vector<std::string> candidates;
  if (!requested.empty()) {
    candidates.push_back(requested);
  } else {
#ifdef FLASHMACE_NVRTC_DEFAULT
    candidates.push_back(FLASHMACE_NVRTC_DEFAULT);
#endif
    candidates.insert(candidates.end(), {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"});
  }
  void* lib = nullptr;
  std::string tried;
  for (const auto& c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    tried += (tried.empty() ? "" : ", ") + c;
  }
  if (!lib) {
    n.error = "NVRTC not found (tried " + tried + "); set FLASHMACE_NVRTC_LIBRARY to libnvrtc.so";
    return n;
  }
  const bool all = bind(lib, "nvrtcVersion", &n.version) && bind(lib, "nvrtcGetErrorString", &n.error_string) &&
                   bind(lib, "nvrtcCreateProgram", &n.create_program) &&
                   bind(lib, "nvrtcCompileProgram", &n.compile_program) &&
                   bind(lib, "nvrtcGetProgramLogSize", &n.log_size) && bind(lib, "nvrtcGetProgramLog", &n.log) &&
                   bind(lib, "nvrtcGetCUBINSize", &n.cubin_size) && bind(lib, "nvrtcGetCUBIN", &n.cubin) &&
                   bind(lib, "nvrtcDestroyProgram", &n.destroy_program);
  int major = 0, minor = 0;
  if (!all) {
    n.error = "NVRTC library " + candidates.front() + " lacks nvrtcGetCUBIN and friends (NVRTC >= 11.1 needed)";
  } else if (n.version(&major, &minor) != 0) {
    n.error = "nvrtcVersion failed";
  } else {
    n.version_string = std::to_string(major) + "." + std::to_string(minor);
  }
  return n;
}

uint64_t fnv1a(const std::string& bytes, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char ch : bytes) h = (h ^ ch) * 0x100000001b3ULL;
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool make_dirs(const std::string& path) {
  for (std::size_t pos = 1; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    const std::string part = path.substr(0, pos);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// File = header line, source, CUBIN. The header names everything the entry depends on.
constexpr const char* kMagic = "flashmace-sc-cubin 1";
std::string entry_header(const std::string& source, const std::string& arch, const std::string& version,
                         const std::string& image) {
  std::ostringstream h;
  h << kMagic << " arch=" << arch << " nvrtc=" << version << " source=" << source.size() << " cubin=" << image.size()
    << " cubin_fnv=" << hex(fnv1a(image)) << "\n";
  return h.str();
}

bool read_entry(const std::string& path, const std::string& source, const std::string& arch,
                const std::string& version, std::vector<char>* image) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t eol = bytes.find('\n');
  if (eol == std::string::npos) return false;
  const std::string header = bytes.substr(0, eol + 1);
  const std::size_t body = eol + 1;
  if (bytes.size() < body + source.size() || bytes.compare(body, source.size(), source) != 0) return false;
  const std::string cubin = bytes.substr(body + source.size());
  if (cubin.size() < 4 || cubin.compare(0, 4, "\x7f" "ELF") != 0) return false;
  if (header != entry_header(source, arch, version, cubin)) return false;
  image->assign(cubin.begin(), cubin.end());
  return true;
}

void write_entry(const std::string& path, const std::string& contents) {
  static std::atomic<int> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (!out) {
      std::remove(tmp.c_str());
      jit_log_once("cannot write the kernel cache entry " + path + "; continuing without caching it");
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace

void jit_log_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.insert(message).second) std::fprintf(stderr, "flashmace: %s\n", message.c_str());
}

bool nvrtc_available(std::string* why_not) {
  const Nvrtc& n = nvrtc();
  if (why_not) *why_not = n.error;
  return n.ok();
}

std::string jit_cache_dir() {
  std::string dir;
  if (const char* e = std::getenv("FLASHMACE_SC_CACHE"); e && *e) {
    dir = e;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::string(x) + "/flashmace/sc";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.cache/flashmace/sc";
  }
  if (dir.empty() || !make_dirs(dir)) {
    jit_log_once("no usable kernel cache directory (" + (dir.empty() ? std::string("HOME unset") : dir) +
                "); kernels are compiled at every load. Set FLASHMACE_SC_CACHE to a writable directory");
    return "";
  }
  return dir;
}

std::string jit_cache_path(const std::string& source, const std::string& arch) {
  const Nvrtc& n = nvrtc();
  if (!n.ok()) return "";
  const std::string dir = jit_cache_dir();
  if (dir.empty()) return "";
  uint64_t h = fnv1a(source);
  h = fnv1a(std::string(1, '\0') + arch + '\0' + n.version_string, h);
  return dir + "/" + hex(h) + "-" + arch + ".cubin";
}

Cubin compile_cubin(const std::string& source, const std::string& arch, const JitUse& use) {
  Cubin result;
  const Nvrtc& n = nvrtc();
  if (!n.ok()) {
    result.error = n.error;
    jit_log_once(n.error + "; " + use.fallback);
    return result;
  }
  const std::string path = jit_cache_path(source, arch);
  if (!path.empty() && read_entry(path, source, arch, n.version_string, &result.image)) {
    result.from_cache = true;
    return result;
  }

  nvrtcProgram prog = nullptr;
  if (int rc = n.create_program(&prog, source.c_str(), "flashmace_jit.cu", 0, nullptr, nullptr); rc != 0) {
    result.error = std::string("nvrtcCreateProgram: ") + n.error_string(rc);
  } else {
    const std::string arch_opt = "--gpu-architecture=" + arch;
    const char* opts[] = {arch_opt.c_str(), "--std=c++17"};
    const int compiled = n.compile_program(prog, 2, opts);
    std::size_t log_size = 0;
    std::string log;
    if (n.log_size(prog, &log_size) == 0 && log_size > 1) {
      log.resize(log_size);
      n.log(prog, log.data());
      log.resize(log_size - 1);
    }
    std::size_t size = 0;
    if (compiled != 0) {
      result.error = "NVRTC failed to compile " + use.kernels + " for " + arch + " (" + n.error_string(compiled) +
                     "): " + log.substr(0, 2000);
    } else if (n.cubin_size(prog, &size) != 0 || size == 0) {
      result.error = "NVRTC produced no CUBIN for " + arch;
    } else {
      result.image.resize(size);
      if (n.cubin(prog, result.image.data()) != 0) {
        result.image.clear();
        result.error = "nvrtcGetCUBIN failed";
      }
    }
    n.destroy_program(&prog);
  }
  if (!result) {
    jit_log_once(result.error + "; " + use.fallback);
    return result;
  }
  if (!path.empty()) {
    const std::string image(result.image.begin(), result.image.end());
    write_entry(path, entry_header(source, arch, n.version_string, image) + source + image);
  }
  return result;
}

}  // namespace flashmace
