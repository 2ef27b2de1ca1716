// A minimal parallel-for over independent tasks (heads), and the thread counts the machine allows. Each task
// writes only its own slot, so the results do not depend on the number of threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "sparge/core/error.h"

namespace sparge::core {

// The machine's hardware threads (at least 1).
inline int hardwareThreads() {
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

// Threads for bulk host work beside an engine (loading entries, preparing uploads): one a core, at most 8.
// HDF5 reads take turns and ranks of one host share its cores, so more would not help.
inline int bulkThreads() {
  return std::min(hardwareThreads(), 8);
}

// The most threads one pool starts: more than the machine runs at once only adds stacks and switching
// (and each thread reserves its stack, which an address-space limit may not allow).
inline constexpr int kThreadsPerHardwareThread = 4;
inline int maxThreads() {
  return kThreadsPerHardwareThread * hardwareThreads();
}

// A requested thread count as a pool uses it: 0 = one per hardware thread, above maxThreads() capped.
inline int usableThreads(int requested) {
  return requested <= 0 ? hardwareThreads() : std::min(requested, maxThreads());
}

// The error for a thread the system refused to start (address space, process limits).
inline Error threadStartError(int started, int wanted, const std::system_error& e) {
  return Error("threads", "could not start thread " + std::to_string(started + 1) + " of " +
                              std::to_string(wanted) + " (" + e.what() +
                              ") — run with fewer threads (--threads N) or raise the process limits");
}

// std::async(std::launch::async, ...) whose failure to start a thread is a sparge::Error, not a
// std::system_error without context.
template <class F>
auto startAsync(F&& f) {
  try {
    return std::async(std::launch::async, std::forward<F>(f));
  } catch (const std::system_error& e) {
    throw threadStartError(0, 1, e);
  }
}

// Runs task(0) … task(count − 1) on up to usableThreads(threads) threads (the caller's among them). The
// first exception of a task stops handing out work and is rethrown after every thread has ended; a thread
// that cannot be started ends the others the same way and becomes a sparge::Error.
inline void parallelFor(int64_t count, int threads, const std::function<void(int64_t)>& task) {
  const int workers = int(std::max<int64_t>(1, std::min<int64_t>(usableThreads(threads), count)));
  if (workers <= 1) {
    for (int64_t i = 0; i < count; ++i) task(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr firstError;
  std::mutex errorMutex;
  auto stop = [&](std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (!firstError) firstError = std::move(error);
    next.store(count);  // stop handing out work
  };
  auto worker = [&] {
    for (;;) {
      const int64_t i = next.fetch_add(1);
      if (i >= count) return;
      try {
        task(i);
      } catch (...) {
        stop(std::current_exception());
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(size_t(workers - 1));
  for (int w = 1; w < workers && next.load() < count; ++w) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error& e) {
      // Threads already started must be joined before they are destroyed (else std::terminate).
      stop(std::make_exception_ptr(threadStartError(w, workers, e)));
    }
  }
  worker();
  for (auto& t : pool) t.join();
  if (firstError) std::rethrow_exception(firstError);
}

}  // namespace sparge::core
