// Run-time loading of an optional shared library (CUPTI, NVML, cuDNN): the first candidate that dlopens and
// whose function table binds, with a message naming every candidate tried when none does.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace sparge::core::dl {

// A loaded function table, or why there is none.
template <typename Api>
struct LoadResult {
  bool ok = false;
  Api api;                 // complete when ok, all null otherwise
  std::string path;        // the candidate that was opened (ok), else empty
  std::string error;       // why loading failed (names every candidate tried); empty when ok
  void* handle = nullptr;  // never closed: handles and threads of the library may outlive any one user
};

inline std::string lastError() {
  const char* e = dlerror();
  return e ? std::string(e) : std::string("unknown dlopen error");
}

// Fills `slot` with `name` from `handle`; on failure returns false and appends the name to `missing`.
template <typename Fn>
bool resolve(void* handle, const char* name, Fn& slot, std::string& missing) {
  dlerror();
  void* sym = dlsym(handle, name);
  if (!sym) {
    missing += (missing.empty() ? "" : ", ") + std::string(name);
    return false;
  }
  slot = reinterpret_cast<Fn>(sym);
  return true;
}

// $envVar alone when it is set and non-empty (an explicit choice is not second-guessed, and a bad path is a
// way to turn the library off), else `defaults`.
inline std::vector<std::string> candidates(const char* envVar, std::vector<std::string> defaults) {
  const char* env = std::getenv(envVar);
  if (env && *env) return {env};
  return defaults;
}

// Opens the candidates in order. `bind(handle, api)` fills the table and returns "" to accept the library,
// or why it is refused (then the handle is closed and the next candidate is tried). The error reads
// "<soname> not loaded: <path> (<why>); ...; set <envVar> to its path".
template <typename Api, typename Bind>
LoadResult<Api> openFirst(const std::vector<std::string>& paths, const std::string& soname,
                          const char* envVar, Bind bind) {
  LoadResult<Api> r;
  std::string tried;
  auto note = [&](const std::string& path, const std::string& why) {
    tried += (tried.empty() ? "" : "; ") + path + " (" + why + ")";
  };
  for (const std::string& path : paths) {
    if (path.empty()) continue;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      note(path, "dlopen: " + lastError());
      continue;
    }
    Api api;
    const std::string refused = bind(h, api);
    if (!refused.empty()) {
      note(path, refused);
      dlclose(h);
      continue;
    }
    r.ok = true;
    r.api = api;
    r.path = path;
    r.handle = h;
    return r;
  }
  if (tried.empty()) tried = "no candidate paths";
  r.error = soname + " not loaded: " + tried + "; set " + envVar + " to its path";
  return r;
}

}  // namespace sparge::core::dl
