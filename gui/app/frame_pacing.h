// When the UI thread draws its next frame: at once while input or new results settle, otherwise after
// sleeping until input, a result from the worker or a due refresh. A frame drawn beside an engine run on a
// small CPU slows the run and delays its result by up to a frame (software rendering: tens of ms).
#pragma once

namespace sparge::gui {

// What the frame just drawn saw, and what is going on now.
struct PacingState {
  bool resultsWaiting = false;  // the worker posted results that the next frame applies
  bool activity = false;        // the frame saw input, applied results or changed the settings
  bool runScheduled = false;    // the frame changed what the interactive run computes (a slider moved)
  bool runInFlight = false;     // an interactive run is queued or running
  bool busy = false;            // the worker runs something (the status bar's spinner turns)
  bool held = false;            // a mouse button or key is held down (ImGui repeats while held)
  bool textInput = false;       // a text field has the keyboard (its cursor blinks)
};

class FramePacer {
 public:
  // Frames drawn after any activity before the UI may sleep: ImGui lays a new window out on the frame
  // after it appears (menus, popups, tooltips).
  static constexpr int kSettleFrames = 2;
  // After a change that scheduled a run, a settling frame waits this long at most for that run, so that it
  // shows the run's result instead of being drawn beside it; input and results end the wait at once.
  static constexpr double kRunWaitS = 0.1;
  static constexpr double kHeldS = 0.05;      // key and button repeat
  static constexpr double kTextInputS = 0.1;  // cursor blink
  static constexpr double kBusyS = 0.125;     // the spinner's step
  static constexpr double kIdleS = 0.5;

  // After a frame: how long to sleep before the next one, in seconds (0: draw it at once).
  double next(const PacingState& s);
  // Before a frame's draw lists go to GL: whether to leave it undrawn (not rendered nor presented; the
  // screen keeps the frame before). Only a frame that scheduled a run whose result is expected within
  // kRunWaitS (judging by the last run's wall time) and shows no new result itself: that run's result
  // needs a frame of its own, and one drawn beside the run slows it and holds the result back until it
  // is done. Never twice in a row, so that a drag still shows every other frame.
  bool deferFrame(bool runScheduledOnly, double lastRunS);

 private:
  int settle_ = kSettleFrames;
  bool awaitRun_ = false;  // the frames settling now follow a change that scheduled a run
  bool deferred_ = false;  // the last frame was left undrawn
};

}  // namespace sparge::gui
