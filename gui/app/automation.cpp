#include "automation.h"

#include <chrono>
#include <cstdio>
#include <thread>

namespace sparge::gui {

namespace {
using Clock = std::chrono::steady_clock;

// Writes the framebuffer; returns the error, or "" when written.
std::string writeScreenshot(Platform& platform, const std::string& path) {
  int w = 0, h = 0;
  platform.framebufferSize(&w, &h);
  try {
    writeFramebufferPng(path, w, h);
    std::fprintf(stderr, "sparge-studio: wrote %s (%dx%d)\n", path.c_str(), w, h);
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

// The exit status once the loop ends, with what went wrong printed.
int finish(Session& session, Platform& platform, const AutomationOptions& opt, const ActionRunner& runner,
           bool timedOut, bool actionsDone, double elapsed) {
  int result = 0;
  if (!opt.screenshot.empty()) {
    std::string error = writeScreenshot(platform, opt.screenshot);
    if (!error.empty()) {
      std::fprintf(stderr, "sparge-studio: %s\n", error.c_str());
      result = 1;
    }
  }
  if (runner.failed()) {
    std::fprintf(stderr, "sparge-studio: %s\n", runner.failure().c_str());
    result = 4;
  }
  if (timedOut) {
    std::fprintf(stderr, "sparge-studio: timed out after %.0f s waiting for the worker%s\n", elapsed,
                 actionsDone ? "" : " (actions unfinished)");
    result = 3;
  }
  Messages& m = session.messages();
  while (m.hasError()) {
    std::fprintf(stderr, "sparge-studio: error: %s\n", m.frontError().c_str());
    m.popError();
    result = result ? result : 1;
  }
  for (const auto& n : m.notices()) std::fprintf(stderr, "sparge-studio: %s\n", n.c_str());
  return result;
}
}  // namespace

int runAutomation(App& app, Session& session, Platform& platform, const AutomationOptions& opt,
                  std::vector<Action> actions) {
  auto start = Clock::now();
  int frames = 0, settled = 0;
  bool actionsDone = actions.empty();
  ActionRunner runner(session, app, std::move(actions));
  for (;;) {
    app.frame();
    ++frames;
    // Done when N frames are drawn, the worker has finished, every result is on screen and every
    // --action has run (each one waits for its own job the same way).
    bool idle = !session.busy() && session.engine().ready;
    settled = idle ? settled + 1 : 0;
    bool ready = frames >= opt.frames && settled >= 3;
    if (!actionsDone && frames >= opt.frames) {
      actionsDone = runner.step(ready);
      if (actionsDone) settled = 0;  // let the last action's results reach the screen
      std::string shot = runner.takeScreenshotRequest();
      if (!shot.empty()) runner.screenshotDone(writeScreenshot(platform, shot));
      ready = false;
    }
    double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    bool timedOut = elapsed > opt.timeoutSeconds;
    if (ready || runner.failed() || timedOut) {
      int rc = finish(session, platform, opt, runner, timedOut, actionsDone, elapsed);
      if (rc == 0 && !opt.screenshot.empty())
        std::fprintf(stderr, "sparge-studio: %d frames, %.1f s\n", frames, elapsed);
      return rc;
    }
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    platform.present();
  }
}

}  // namespace sparge::gui
