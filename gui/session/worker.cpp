#include "worker.h"

#include <algorithm>
#include <exception>

#include "sparge/core/error.h"

namespace sparge::gui {

Worker::Worker() : thread_([this] { loop(); }) {}

Worker::~Worker() {
  shutdown();
}

void Worker::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    queue_.clear();
    if (runningCancel_) runningCancel_->store(true);
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Worker::setErrorSink(ErrorSink sink) {
  std::lock_guard lock(mutex_);
  errorSink_ = std::move(sink);
}

uint64_t Worker::submit(const std::string& key, Job job, bool cancelRunning) {
  uint64_t id;
  {
    std::lock_guard lock(mutex_);
    id = nextId_++;
    bool replaced = false;
    for (auto& e : queue_) {
      if (e.key == key) {
        e.job = std::move(job);
        e.id = id;
        ++coalesced_;
        replaced = true;
        break;
      }
    }
    if (!replaced) queue_.push_back(Entry{key, std::move(job), id});
    if (cancelRunning && running_ && runningKey_ == key && runningCancel_) runningCancel_->store(true);
  }
  wake_.notify_all();
  return id;
}

void Worker::cancel(const std::string& key) {
  std::lock_guard lock(mutex_);
  for (auto it = queue_.begin(); it != queue_.end();) {
    it = it->key == key ? queue_.erase(it) : it + 1;
  }
  if (running_ && runningKey_ == key && runningCancel_) runningCancel_->store(true);
  idleCv_.notify_all();
}

void Worker::cancelAll() {
  std::lock_guard lock(mutex_);
  queue_.clear();
  if (running_ && runningCancel_) runningCancel_->store(true);
  idleCv_.notify_all();
}

bool Worker::idle() const {
  std::lock_guard lock(mutex_);
  return queue_.empty() && !running_;
}

bool Worker::waitIdle(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return idleCv_.wait_for(lock, timeout, [this] { return queue_.empty() && !running_; });
}

std::string Worker::runningKey() const {
  std::lock_guard lock(mutex_);
  return running_ ? runningKey_ : std::string();
}

size_t Worker::pendingCount() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

bool Worker::hasPending(const std::string& key) const {
  std::lock_guard lock(mutex_);
  return std::any_of(queue_.begin(), queue_.end(), [&](const Entry& e) { return e.key == key; });
}

uint64_t Worker::executedCount() const {
  std::lock_guard lock(mutex_);
  return executed_;
}
uint64_t Worker::coalescedCount() const {
  std::lock_guard lock(mutex_);
  return coalesced_;
}
uint64_t Worker::cancelledCount() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

void Worker::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Entry e = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    runningKey_ = e.key;
    runningCancel_ = std::make_shared<core::CancelFlag>(false);
    auto cancelFlag = runningCancel_;
    ErrorSink sink = errorSink_;
    lock.unlock();

    bool wasCancelled = false;
    std::string error;
    try {
      e.job(*cancelFlag);
    } catch (const core::Cancelled&) {
      wasCancelled = true;
    } catch (const std::exception& ex) {
      error = ex.what();
    } catch (...) {
      error = "unknown error";
    }
    if (!error.empty() && sink) sink(e.key, error);

    lock.lock();
    running_ = false;
    runningKey_.clear();
    runningCancel_.reset();
    if (wasCancelled) {
      ++cancelled_;
    } else {
      ++executed_;
    }
    if (queue_.empty()) idleCv_.notify_all();
  }
}

}  // namespace sparge::gui
