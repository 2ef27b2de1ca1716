// What the session's controllers share: the worker, the worker-only backend, the loaded capture, the
// engine status, messages and the UI-thread inbox that jobs post their results to.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checks.h"
#include "sparge/core/capture.h"
#include "sparge/core/engine.h"
#include "sparge/core/permutation.h"
#include "sparge/kernels/engine_factory.h"
#include "worker.h"

namespace sparge::gui {

// Every kind of background job. The worker coalesces pending jobs of one kind (latest wins).
enum class JobKind {
  Engine,
  Open,
  Load,
  Run,
  Tune,
  Profile,
  Export,
  Overview,
  Curves,
  OrderCurves,
  MethodCompare
};
// The worker key of a job; `tag` separates jobs of one kind that must not coalesce (exports by path).
std::string jobKey(JobKind kind, const std::string& tag = {});
std::optional<JobKind> jobKindOf(const std::string& key);

struct HeadRef {
  int64_t batch = 0;
  int64_t head = 0;  // query head
  bool operator==(const HeadRef&) const = default;
};

// The engine factory runs on the worker thread (a CUDA engine takes a while to start); it is called once
// for the interactive engine and once more for the overview's own engine.
using EngineFactory = std::function<engines::EngineSelection()>;

// What a capture change resets: everything (Capture) or what belongs to one entry (Entry).
enum class ResetScope { Capture, Entry };

// The open capture and the selection (UI thread).
struct CaptureModel {
  std::string path;
  std::vector<core::EntryInfo> entries;
  std::vector<std::pair<std::string, std::string>> rootAttributes;
  std::string entryName;  // selected entry (loading until `loaded`)
  core::EntryInfo entryInfo;
  std::string entryDigest;  // its content digest (core/digest.h), once loaded
  bool loaded = false;
  HeadRef selected;

  const core::EntryInfo* info() const { return loaded ? &entryInfo : nullptr; }
  const core::EntryInfo* find(const std::string& name) const;
  int64_t headsQ() const { return loaded ? entryInfo.headsQ : 0; }
};

struct EngineStatus {
  std::string name = "starting engine...";
  std::string message;  // why `auto` fell back to the CPU engine, if it did
  bool gpu = false;
  bool ready = false;
  std::optional<core::Target> deviceTarget;  // the kernel family SpargeAttn runs on the engine's GPU
  int64_t gpuUsed = 0, gpuTotal = 0;
};

// Errors (shown in a modal, oldest first), notices (newest last) and warnings about the data.
class Messages {
 public:
  bool hasError() const { return !errors_.empty(); }
  const std::string& frontError() const { return errors_.front(); }
  void popError() { errors_.pop_front(); }
  void pushError(std::string message) { errors_.push_back(std::move(message)); }
  const std::vector<std::string>& notices() const { return notices_; }
  void addNotice(std::string message);
  const std::vector<std::string>& warnings() const { return warnings_; }
  void setWarnings(std::vector<std::string> w) { warnings_ = std::move(w); }
  void addWarning(const std::string& w);

 private:
  std::deque<std::string> errors_;
  std::vector<std::string> notices_;
  std::vector<std::string> warnings_;
};

// Progress of the job that owns the status bar's progress bar (tuning, profiling).
struct Progress {
  bool active = false;
  std::string label;
  int64_t done = 0;
  int64_t total = 0;
  double fraction = 0;  // [0, 1]
};

// State that only the worker thread touches: HDF5 is not thread-safe and engines are not re-entrant.
struct Backend {
  EngineFactory factory;
  std::unique_ptr<core::Engine> engine;
  std::unique_ptr<core::Engine> overviewEngine;  // walks the entries without evicting `engine`'s caches
  std::unique_ptr<core::CaptureReader> reader;
  std::shared_ptr<const core::EntryData> entry;  // what the engine holds: the entry in the chosen token order
  std::unique_ptr<core::PermutedEntries> orders;  // the loaded entry's token orders, each built once

  core::Engine& ensureEngine();
  core::Engine& ensureOverviewEngine();
  // The entry `name` of the open capture (the loaded one without reading it again).
  std::shared_ptr<const core::EntryData> load(const std::string& name);
};

struct SessionCore {
  explicit SessionCore(Worker& w) : worker(w), backend(std::make_shared<Backend>()) {}

  // Worker thread -> UI thread: `fn` runs in the next poll(), and the UI thread is woken for it.
  void post(std::function<void()> fn);
  // What wakes a UI thread that sleeps between frames (App::waitForWork); empty: nothing to wake.
  void setWake(std::function<void()> wake);
  bool drainInbox();  // UI thread; true when anything ran
  bool inboxEmpty() const;

  uint64_t submit(JobKind kind, Worker::Job job, bool cancelRunning = true, const std::string& tag = {});
  void cancel(JobKind kind) { worker.cancel(jobKey(kind)); }
  bool running(JobKind kind) const { return jobKindOf(worker.runningKey()) == kind; }
  bool pending(JobKind kind) const { return worker.hasPending(jobKey(kind)); }  // any thread

  Worker& worker;
  std::shared_ptr<Backend> backend;
  CaptureModel capture;
  EngineStatus engine;
  Messages messages;
  Progress progress;
  ChecksModel checks;  // the loaded parameter file and evaluation report
  uint64_t epoch = 0;  // bumped when the capture or entry changes: late results of the old one are dropped

 private:
  mutable std::mutex inboxMutex_;
  std::vector<std::function<void()>> inbox_;
  std::function<void()> wake_;  // under inboxMutex_: set and cleared while the worker may post
};

}  // namespace sparge::gui
