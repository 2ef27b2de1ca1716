// Long sweeps on the worker in short slices: each slice runs items until a time budget is spent, posts
// every item's result to the UI thread, then queues the next slice behind whatever was submitted
// meanwhile, so a slider move never waits for a whole sweep.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

#include "session_core.h"

namespace sparge::gui {

template <class R>
struct SliceJob {
  JobKind kind = JobKind::Overview;
  size_t count = 0;
  std::chrono::milliseconds slice{100};
  std::function<bool()> current;                           // UI thread: false once superseded
  std::function<R(size_t, const core::CancelFlag&)> work;  // worker thread
  std::function<void(size_t, R)> apply;                    // UI thread
  std::function<void()> finished;                          // UI thread, after the last item
};

// Queues items [start, job->count) of `job` on the worker.
template <class R>
void runInSlices(SessionCore& core, std::shared_ptr<const SliceJob<R>> job, size_t start) {
  core.submit(
      job->kind,
      [&core, job, start](const core::CancelFlag& cancel) {
        auto t0 = std::chrono::steady_clock::now();
        size_t i = start;
        do {
          auto r = std::make_shared<R>(job->work(i, cancel));
          core.post([job, i, r] {
            if (job->current()) job->apply(i, std::move(*r));
          });
          ++i;
        } while (i < job->count && std::chrono::steady_clock::now() - t0 < job->slice);
        core.post([&core, job, i] {
          if (!job->current()) return;
          if (i < job->count) {
            runInSlices(core, job, i);
          } else if (job->finished) {
            job->finished();
          }
        });
      },
      false);
}

}  // namespace sparge::gui
