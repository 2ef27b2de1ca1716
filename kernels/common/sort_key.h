// The 32-bit key of a float whose ascending order is the float's descending order (−0 equal to +0, NaN last),
// as core's rankDescending orders scores, and the float back from it. Shared by Stage 1's warp sort
// (stages/stage1_parts.cuh) and the line predictors' segmented sorts (predictors/line_common.*); host and
// device.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SPARGE_SORT_KEY_HD __host__ __device__
#else
#define SPARGE_SORT_KEY_HD
#endif

namespace sparge::cuda {

SPARGE_SORT_KEY_HD inline uint32_t descendingKey(float v) {
  if (v != v) return 0xffffffffu;
  if (v == 0.f) v = 0.f;
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  const uint32_t ascending = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return ~ascending;
}

// The float whose descendingKey is `key` (−0 comes back as +0, NaN as a NaN).
SPARGE_SORT_KEY_HD inline float fromDescendingKey(uint32_t key) {
  const uint32_t ascending = ~key;
  const uint32_t u = (ascending & 0x80000000u) ? (ascending & 0x7fffffffu) : ~ascending;
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

}  // namespace sparge::cuda
