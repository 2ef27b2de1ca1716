// The warm-up rule of every timing loop (`sparge bench`, the profiler's rounds): untimed runs until at least
// a number of them and at least a span of wall-clock time have gone by, so that the timed runs find the GPU
// in the state sustained load leaves it in rather than fresh from idle.
#pragma once

#include <chrono>

namespace sparge::prof {

// Calls run(i) for i = 0, 1, ... until at least `runs` calls have been made and at least `ms` milliseconds
// have passed; returns the number of calls. `run` should return once its work is done (a GPU caller
// synchronises), so that the wall clock counts the device's time too.
template <class Run>
int warmUp(int runs, int ms, Run&& run) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  int i = 0;
  for (; i < runs || std::chrono::steady_clock::now() < until; ++i) run(i);
  return i;
}

}  // namespace sparge::prof
