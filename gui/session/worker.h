// A single background thread that runs engine jobs so the UI thread never waits (ImHex's TaskManager idea).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "sparge/core/engine.h"

namespace sparge::gui {

// Jobs are queued under a key ("open", "load", "run", "tune"...). Submitting under a key that already
// has a pending job replaces that job in place (latest wins: a burst of slider moves runs once), and
// can ask a running job of the same key to stop through its cancel flag. Jobs run one at a time in
// the order their key was first queued. Exceptions escaping a job are swallowed after being handed to
// the error sink, so that one bad job never takes the thread down.
class Worker {
 public:
  using Job = std::function<void(const core::CancelFlag& cancel)>;
  using ErrorSink = std::function<void(const std::string& key, const std::string& message)>;

  Worker();
  ~Worker();  // shutdown()
  // Cancels everything and joins the thread; nothing runs afterwards (submit() only queues). Idempotent.
  void shutdown();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void setErrorSink(ErrorSink sink);

  // Returns the job's id (increasing). `cancelRunning`: also cancel a running job with this key.
  uint64_t submit(const std::string& key, Job job, bool cancelRunning = true);
  // Drops the pending job of `key` and cancels the running one if it has this key.
  void cancel(const std::string& key);
  void cancelAll();

  bool idle() const;  // nothing pending, nothing running
  // Blocks until idle or until `timeout`; returns idle(). For tests and the screenshot mode only.
  bool waitIdle(std::chrono::milliseconds timeout) const;
  std::string runningKey() const;  // empty when idle
  size_t pendingCount() const;
  bool hasPending(const std::string& key) const;  // a job of `key` waits (thread-safe)

  // Counters for tests and the status bar.
  uint64_t executedCount() const;   // jobs that ran to the end (or threw)
  uint64_t coalescedCount() const;  // pending jobs replaced by a newer one
  uint64_t cancelledCount() const;  // jobs that ended with core::Cancelled

 private:
  struct Entry {
    std::string key;
    Job job;
    uint64_t id = 0;
  };
  void loop();

  mutable std::mutex mutex_;
  mutable std::condition_variable wake_;
  mutable std::condition_variable idleCv_;
  std::deque<Entry> queue_;
  std::string runningKey_;
  std::shared_ptr<core::CancelFlag> runningCancel_;
  bool running_ = false;
  bool stop_ = false;
  uint64_t nextId_ = 1;
  uint64_t executed_ = 0, coalesced_ = 0, cancelled_ = 0;
  ErrorSink errorSink_;
  std::thread thread_;
};

}  // namespace sparge::gui
