// The host clock used for run windows and wall-clock timing: std::chrono::steady_clock in nanoseconds.
#pragma once

#include <chrono>
#include <cstdint>

namespace sparge::prof {

inline uint64_t steadyNs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

}  // namespace sparge::prof
