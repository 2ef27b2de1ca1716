// A minimal parallel-for over independent tasks (heads). Each task writes only its own slot, so the
// results do not depend on the number of threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sparge::core {

// Threads for bulk host work beside an engine (loading entries, preparing uploads): one a core, at most 8.
// HDF5 reads take turns and ranks of one host share its cores, so more would not help.
inline int bulkThreads() {
  return int(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

inline void parallelFor(int64_t count, int threads, const std::function<void(int64_t)>& task) {
  const int workers = int(std::max<int64_t>(1, std::min<int64_t>(threads, count)));
  if (workers <= 1) {
    for (int64_t i = 0; i < count; ++i) task(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr firstError;
  std::mutex errorMutex;
  auto worker = [&] {
    for (;;) {
      const int64_t i = next.fetch_add(1);
      if (i >= count) return;
      try {
        task(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!firstError) firstError = std::current_exception();
        next.store(count);  // stop handing out work
      }
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (firstError) std::rethrow_exception(firstError);
}

}  // namespace sparge::core
