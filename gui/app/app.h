// The application shell: menus, shortcuts, the tiled layout of the views, dialogs and the status bar.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/options.h"
#include "app/platform.h"
#include "session.h"
#include "settings.h"
#include "views/view.h"
#include "widgets/file_browser.h"

namespace sparge::gui {

class HeadGrid;

class App {
 public:
  App(Session& session, AppSettings& settings, Platform& platform, std::string settingsPath, bool automation);
  ~App();

  // Builds the font atlas for `scale` (HiDPI content scale x user font scale).
  void setupStyleAndFonts(float scale);
  // One frame: poll the session, draw everything, render. Does not present.
  void frame();
  // After frame(): writes the pending window screenshot, if one was asked for.
  void afterRender();
  void openFile(const std::string& path);
  void requestScreenshot(const std::string& path) { screenshotPath_ = path; }
  HeadGrid& grid() { return *grid_; }
  UiState& ui() { return ui_; }

 private:
  void drawMenu();
  void handleShortcuts();
  void drawLayout();
  void drawStatusBar(float height);
  void drawDialogs();
  void startExport(const std::string& purpose, const std::string& title, const std::string& ext,
                   const std::string& suffix);
  std::string defaultDir() const;

  Session& session_;
  AppSettings& settings_;
  Platform& platform_;
  std::string settingsPath_;
  bool automation_;
  UiState ui_;
  std::vector<std::unique_ptr<View>> views_;  // capture, controls, grid, detail, summary, timings
  HeadGrid* grid_ = nullptr;
  FileBrowser browser_;
  std::string screenshotPath_;
  bool showAbout_ = false, showShortcuts_ = false;
  float pendingFontScale_ = 0;
  float baseScale_ = 1;
};

}  // namespace sparge::gui
