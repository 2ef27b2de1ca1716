// App settings persisted between runs (recent files, layout, budget) in ~/.config/sparge-studio/.
#pragma once

#include <string>
#include <vector>

namespace sparge::gui {

// The views stacked as tabs in one panel of the layout, and the one in front.
struct PanelTabs {
  std::vector<std::string> views;  // view ids ("heads", "overview", ...)
  std::string active;
  bool operator==(const PanelTabs&) const = default;
};

// Layout of the tiled views: splitter positions as fractions of the work area, and which views sit in
// the six panels (left top / bottom, centre top / bottom, right top / bottom; see gui/app/panels.cpp).
struct LayoutSettings {
  float leftWidth = 0.20f;
  float rightWidth = 0.34f;  // the summary table's eleven columns fit at 1600 px
  float gridHeight = 0.42f;
  float leftTopHeight = 0.40f;
  float rightTopHeight = 0.58f;
  std::vector<PanelTabs> panels;  // empty: the views' default panels (gui/views/registry.cpp)
};

struct AppSettings {
  std::vector<std::string> recentFiles;  // most recent first, at most kMaxRecent
  std::string lastDirectory;             // where the file browser opens
  LayoutSettings layout;
  int windowWidth = 1600;
  int windowHeight = 1000;
  float fontScale = 1.0f;  // multiplies the HiDPI content scale
  double budgetL1 = 0.07;
  double budgetL2 = 0.08;
  int profileRuns = 5;      // the timings view's run count (1..20: its slider)
  int profileWarmupMs = 0;  // and its warm-up by time (0..ProfileController::kMaxWarmupMs; 0: one round)

  static constexpr size_t kMaxRecent = 10;
  void addRecent(const std::string& path);
};

// $XDG_CONFIG_HOME/sparge-studio or ~/.config/sparge-studio (created on demand by save()).
std::string configDirectory();

// Missing or unreadable file: defaults (a broken settings file must never stop the app).
AppSettings loadSettings(const std::string& path);
// Written atomically; throws sparge::Error when the folder cannot be created or written.
void saveSettings(const std::string& path, const AppSettings& s);

}  // namespace sparge::gui
