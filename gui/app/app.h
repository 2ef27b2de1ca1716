// The application shell: menus and shortcuts from the command registry, the tiled panels of the views,
// dialogs and the status bar.
#pragma once

#include <imgui.h>

#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/frame_pacing.h"
#include "app/panels.h"
#include "app/platform.h"
#include "session.h"
#include "settings.h"
#include "sparge/core/dense_hint.h"
#include "views/view.h"
#include "widgets/file_browser.h"

namespace sparge::gui {

// Where the last frame's time went on the UI thread, in ms (the GL driver may still be rasterising after
// submitMs: a caller that needs the pixels waits with glFinish).
struct FrameTimes {
  double pollMs = 0;      // results handed over by the worker, applied
  double viewsMs = 0;     // the panels' views building their ImGui lists (per view in PanelLayout::viewTimes)
  double otherMs = 0;     // new frame, menus, status bar, dialogs
  double renderMs = 0;    // ImGui::Render: the draw lists closed
  double submitMs = 0;    // the draw lists handed to GL
  bool applied = false;   // poll() applied something this frame
  bool deferred = false;  // left undrawn for the result of the run it scheduled (FramePacer::deferFrame)
  int vertices = 0, indices = 0, drawCalls = 0;  // what the frame handed to GL
};

class App {
 public:
  App(Session& session, AppSettings& settings, Platform& platform, bool automation);
  ~App();

  // Builds the font atlas for `scale` (HiDPI content scale x user font scale).
  void setupStyleAndFonts(float scale);
  // One frame: poll the session, draw everything, render. Does not present; a frame left undrawn
  // (lastFrameTimes().deferred) is not to be presented either.
  void frame();
  // Whether frames that schedule a fast run may be left undrawn for its result (interactive use; off by
  // default, so that automation and screenshots see every frame).
  void setDeferFrames(bool on) { deferFrames_ = on; }
  // After frame(): writes the pending window screenshot, if one was asked for.
  void afterRender();
  // After a frame is presented: returns at once while input or results settle, else sleeps until input,
  // a result from the worker (the session wakes the platform) or a due refresh (frame_pacing.h).
  void waitForWork();
  void openFile(const std::string& path);
  // Runs a command of the registry as the menu or its shortcut does.
  void run(CommandId id);
  // Brings a view to the front of its panel; "ID:PANEL" ("kernels:centre-bottom") moves it there first.
  bool showView(const std::string& idAndPanel);
  bool viewVisible(const std::string& idAndPanel) const;
  // A view id, optionally with ":PANEL" (see showView).
  static bool isViewId(const std::string& idAndPanel);
  UiState& ui() { return ui_; }
  const FrameTimes& lastFrameTimes() const { return frameTimes_; }
  const PanelLayout& panels() const { return panels_; }

 private:
  void drawMenu();
  void drawMenuItems(const char* menu);
  void drawRecentFiles();
  void drawViewPlacement();
  void handleShortcuts();
  void drawStatusBar(float height);
  void drawHostBackground();
  bool sawInput();  // after ImGui::NewFrame: whether input arrived since the last frame
  void submit(FrameTimes& t);
  void drawDialogs();
  void drawShortcutHelp();
  void drawAbout();
  void drawErrorModal();
  bool enabled(CommandId id) const;
  void runSessionCommand(CommandId id);  // run()'s commands on the session
  void runViewCommand(CommandId id);     // run()'s commands on the views and the window
  void startExport(const std::string& purpose, const std::string& title, const std::string& ext,
                   const std::string& suffix);
  void screenshotNow();
  std::string defaultDir() const;

  Session& session_;
  AppSettings& settings_;
  Platform& platform_;
  bool automation_;
  UiState ui_;
  std::vector<std::unique_ptr<View>> views_;
  PanelLayout panels_;
  FileBrowser browser_;
  std::string screenshotPath_;
  bool showAbout_ = false, showShortcuts_ = false;
  std::optional<core::DenseHint> hint_;  // for the results of generation hintGeneration_
  uint64_t hintGeneration_ = ~uint64_t{0};
  uint64_t hintChecks_ = ~uint64_t{0};  // ... and of the loaded files (their budget)
  float pendingFontScale_ = 0;
  float baseScale_ = 1;
  FrameTimes frameTimes_;
  FramePacer pacer_;
  PacingState pacing_;  // what the last frame saw
  uint64_t seenConfig_ = 0;
  bool deferFrames_ = false;
  ImVec2 lastMouse_, lastDisplay_;
};

}  // namespace sparge::gui
