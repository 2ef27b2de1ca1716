#include "settings.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "profile_controller.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"

namespace sparge::gui {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PanelTabs, views, active)

namespace {
// The one list of persisted fields and their keys: load and save both walk it.
template <class S, class F>
void forEachField(S& s, F&& f) {
  f("recent_files", s.recentFiles);
  f("last_directory", s.lastDirectory);
  f("left_width", s.layout.leftWidth);
  f("right_width", s.layout.rightWidth);
  f("grid_height", s.layout.gridHeight);
  f("left_top_height", s.layout.leftTopHeight);
  f("right_top_height", s.layout.rightTopHeight);
  f("panels", s.layout.panels);
  f("window_width", s.windowWidth);
  f("window_height", s.windowHeight);
  f("font_scale", s.fontScale);
  f("budget_l1", s.budgetL1);
  f("budget_l2", s.budgetL2);
  f("profile_runs", s.profileRuns);
  f("profile_warmup_ms", s.profileWarmupMs);
}

void clampRanges(AppSettings& s) {
  const AppSettings d;
  auto clampF = [](float& v, float lo, float hi, float def) { v = (v >= lo && v <= hi) ? v : def; };
  LayoutSettings& l = s.layout;
  clampF(l.leftWidth, 0.1f, 0.5f, d.layout.leftWidth);
  clampF(l.rightWidth, 0.1f, 0.5f, d.layout.rightWidth);
  clampF(l.gridHeight, 0.1f, 0.9f, d.layout.gridHeight);
  clampF(l.leftTopHeight, 0.1f, 0.9f, d.layout.leftTopHeight);
  clampF(l.rightTopHeight, 0.1f, 0.9f, d.layout.rightTopHeight);
  clampF(s.fontScale, 0.5f, 3.0f, d.fontScale);
  if (s.windowWidth < 320 || s.windowWidth > 16384) s.windowWidth = d.windowWidth;
  if (s.windowHeight < 240 || s.windowHeight > 16384) s.windowHeight = d.windowHeight;
  if (s.recentFiles.size() > AppSettings::kMaxRecent) s.recentFiles.resize(AppSettings::kMaxRecent);
  if (l.panels.size() != d.layout.panels.size()) l.panels = d.layout.panels;
  if (s.profileRuns < 1 || s.profileRuns > 20) s.profileRuns = d.profileRuns;
  if (s.profileWarmupMs < 0 || s.profileWarmupMs > ProfileController::kMaxWarmupMs)
    s.profileWarmupMs = d.profileWarmupMs;
}
}  // namespace

void AppSettings::addRecent(const std::string& path) {
  std::string p = path;
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  if (!ec) p = abs.lexically_normal().string();
  recentFiles.erase(std::remove(recentFiles.begin(), recentFiles.end(), p), recentFiles.end());
  recentFiles.insert(recentFiles.begin(), p);
  if (recentFiles.size() > kMaxRecent) recentFiles.resize(kMaxRecent);
}

std::string configDirectory() {
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/sparge-studio";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.config/sparge-studio";
  return ".sparge-studio";
}

AppSettings loadSettings(const std::string& path) {
  AppSettings s;
  std::ifstream in(path);
  if (!in) return s;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    forEachField(s, [&](const char* key, auto& field) {
      if (j.contains(key)) field = j.at(key).get<std::decay_t<decltype(field)>>();
    });
  } catch (const std::exception&) {
    return AppSettings{};
  }
  clampRanges(s);
  return s;
}

void saveSettings(const std::string& path, const AppSettings& s) {
  nlohmann::json j;
  forEachField(s, [&](const char* key, const auto& field) { j[key] = field; });
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) throw Error(path, "cannot create the settings folder: " + ec.message());
  core::writeTextAtomically(path, j.dump(2) + "\n");
}

}  // namespace sparge::gui
