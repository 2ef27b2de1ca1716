// Base class of the views (ImHex's View idea): each view draws itself from the Session and sends commands.
#pragma once

#include <string>

#include "session.h"

namespace sparge::gui {

// UI state shared between views (not part of the data layer: nothing here changes results).
struct UiState {
  HeadSort gridSort = HeadSort::Index;
  bool gridDescending = false;
  float thumbSize = 96.0f;
  ApplyTarget applyTarget = ApplyTarget::AllHeads;
  int profileRuns = 5;          // from the saved settings (AppSettings::profileRuns), saved back on exit
  int profileWarmupMs = 0;      // warm-up by time before the profiled runs; 0: one warm-up round (saved too)
  bool screenshotMode = false;  // automation: hide volatile bits
  bool captureOrder = false;    // head detail: maps of a permuted run shown in the capture's token order
};

class View {
 public:
  virtual ~View() = default;
  virtual const char* id() const = 0;     // stable name: settings, `--action view=ID`
  virtual const char* title() const = 0;  // tab label
  // Draws the view's contents into the current child window.
  virtual void draw(Session& session, UiState& ui) = 0;
};

}  // namespace sparge::gui
