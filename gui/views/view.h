// Base class of the views (ImHex's View idea): each view draws itself from the Session and sends commands.
#pragma once

#include <memory>
#include <string>
#include <vector>

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
};

// A view's id and title come from its row in the registry (views/registry.cpp), which makes every view.
class View {
 public:
  virtual ~View() = default;
  const char* id() const { return id_; }        // stable name: settings, `--action view=ID`
  const char* title() const { return title_; }  // tab label and View-menu entry
  // Draws the view's contents into the current child window.
  virtual void draw(Session& session, UiState& ui) = 0;

 private:
  friend std::vector<std::unique_ptr<View>> makeViews();
  const char* id_ = "";
  const char* title_ = "";
};

}  // namespace sparge::gui
