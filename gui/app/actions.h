// Automation actions of sparge-studio (--action): the File/Run menu commands, run in order after the
// first results land, each waiting for its background job and checking what it produced.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "session.h"

namespace sparge::gui {

// One `--action verb[=argument]`. Verbs: export-masks=P.h5, export-params=P.json,
// export-report=P.json|P.csv|P.md, load-params=P.json, tune=head|entry|all, tune-cancel=head|entry|all
// (starts a tune and cancels it after its first progress report), profile[=N], set=key=value (through
// the session commands, like the sliders), follow=0|1, select-entry=NAME, select-head=N, screenshot=P.png.
struct Action {
  std::string verb;
  std::string arg;
  std::string text;  // as given, for messages
};

// Throws sparge::Error naming the action for unknown verbs or missing / bad arguments.
Action parseAction(const std::string& text);
const char* actionHelp();

// Runs the actions one by one, driven once per frame from the automation loop.
class ActionRunner {
 public:
  ActionRunner(Session& session, std::vector<Action> actions) : session_(session), actions_(std::move(actions)) {}

  // Call once per frame after Session::poll(); `settled` = the worker has been idle for a few frames.
  // Returns true when every action has finished (or one failed).
  bool step(bool settled);
  bool failed() const { return failed_; }
  const std::string& failure() const { return failure_; }
  // A window screenshot the runner wants written after this frame (screenshot=P.png); cleared by take.
  std::string takeScreenshotRequest();
  void screenshotDone(const std::string& error);

 private:
  enum class Phase { Start, Running, Wait };
  void start(const Action& a);
  void finish(const Action& a);  // checks the outcome; sets failed_ on a problem
  void fail(const Action& a, const std::string& why);

  Session& session_;
  std::vector<Action> actions_;
  size_t next_ = 0;
  Phase phase_ = Phase::Start;
  bool failed_ = false;
  std::string failure_;
  bool cancelSent_ = false;
  std::string screenshotRequest_;
  std::string screenshotError_;
  bool screenshotPending_ = false;
  std::chrono::steady_clock::time_point startedAt_;
  size_t noticesBefore_ = 0;                         // notices present when the action started
  std::shared_ptr<const core::TuneResult> tuneBefore_;  // lastTune() when the action started
};

}  // namespace sparge::gui
