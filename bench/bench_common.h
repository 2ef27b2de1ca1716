// Small helpers shared by the CUDA kernel benchmarks in bench/: a CUDA error ends the run with its name, and
// comma-separated option lists.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace sparge::bench {

inline void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// "8192,16384" -> {"8192", "16384"}.
inline std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  return out;
}

}  // namespace sparge::bench
