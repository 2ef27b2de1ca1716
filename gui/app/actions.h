// Automation actions of sparge-studio (--action): the registry's commands with an argument, run in order
// after the first results land, each waiting for its background job and checking what it produced.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "session.h"

namespace sparge::gui {

class App;

// One `--action verb[=argument]`; the verbs are the registry's (commands.h, `actionHelp()`).
struct Action {
  const CommandInfo* command = nullptr;
  std::string arg;
  std::string text;  // as given, for messages
};

// Throws sparge::Error naming the action for unknown verbs or missing / bad arguments; an export's target
// is checked here, before any work (checkExportTarget, against `capturePath`, the capture to be opened).
Action parseAction(const std::string& text, const std::string& capturePath = "");

// Runs the actions one by one, driven once per frame from the automation loop.
class ActionRunner {
 public:
  ActionRunner(Session& session, App& app, std::vector<Action> actions)
      : session_(session), app_(app), actions_(std::move(actions)) {}

  // Call once per frame after the frame is drawn; `settled` = the worker has been idle for a few frames.
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
  void applySet(const Action& a);  // the `set` action
  void finish(const Action& a);    // checks the outcome; sets failed_ on a problem
  void fail(const Action& a, const std::string& why);
  bool noticeSince(const std::string& needle) const;
  bool checkFileWritten(const Action& a, const std::string& path);
  bool checkTunedValuesShown(const Action& a);
  void checkTune(const Action& a);
  void checkLoadedParams(const Action& a);
  void checkView(const Action& a);
  void checkSweep(const Action& a);
  void checkPreset(const Action& a);
  void checkTuneCancelled(const Action& a);
  void checkMethodsCompared(const Action& a);
  void checkBudgetFollowed(const Action& a);

  Session& session_;
  App& app_;
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
  size_t noticesBefore_ = 0;                            // notices present when the action started
  std::shared_ptr<const core::TuneResult> tuneBefore_;  // lastTune() when the action started
};

}  // namespace sparge::gui
