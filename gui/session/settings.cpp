#include "settings.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"

namespace sparge::gui {

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
    auto get = [&](const char* key, auto& field) {
      if (j.contains(key)) field = j.at(key).get<std::decay_t<decltype(field)>>();
    };
    get("recent_files", s.recentFiles);
    get("last_directory", s.lastDirectory);
    get("left_width", s.leftWidth);
    get("right_width", s.rightWidth);
    get("grid_height", s.gridHeight);
    get("left_top_height", s.leftTopHeight);
    get("right_top_height", s.rightTopHeight);
    get("window_width", s.windowWidth);
    get("window_height", s.windowHeight);
    get("font_scale", s.fontScale);
    get("budget_l1", s.budgetL1);
    get("budget_l2", s.budgetL2);
  } catch (const std::exception&) {
    return AppSettings{};
  }
  if (s.recentFiles.size() > AppSettings::kMaxRecent) s.recentFiles.resize(AppSettings::kMaxRecent);
  auto clampF = [](float& v, float lo, float hi, float def) { v = (v >= lo && v <= hi) ? v : def; };
  AppSettings d;
  clampF(s.leftWidth, 0.1f, 0.5f, d.leftWidth);
  clampF(s.rightWidth, 0.1f, 0.5f, d.rightWidth);
  clampF(s.gridHeight, 0.1f, 0.9f, d.gridHeight);
  clampF(s.leftTopHeight, 0.1f, 0.9f, d.leftTopHeight);
  clampF(s.rightTopHeight, 0.1f, 0.9f, d.rightTopHeight);
  clampF(s.fontScale, 0.5f, 3.0f, d.fontScale);
  if (s.windowWidth < 320 || s.windowWidth > 16384) s.windowWidth = d.windowWidth;
  if (s.windowHeight < 240 || s.windowHeight > 16384) s.windowHeight = d.windowHeight;
  return s;
}

void saveSettings(const std::string& path, const AppSettings& s) {
  nlohmann::json j;
  j["recent_files"] = s.recentFiles;
  j["last_directory"] = s.lastDirectory;
  j["left_width"] = s.leftWidth;
  j["right_width"] = s.rightWidth;
  j["grid_height"] = s.gridHeight;
  j["left_top_height"] = s.leftTopHeight;
  j["right_top_height"] = s.rightTopHeight;
  j["window_width"] = s.windowWidth;
  j["window_height"] = s.windowHeight;
  j["font_scale"] = s.fontScale;
  j["budget_l1"] = s.budgetL1;
  j["budget_l2"] = s.budgetL2;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) throw Error(path, "cannot create the settings folder: " + ec.message());
  core::writeTextAtomically(path, j.dump(2) + "\n");
}

}  // namespace sparge::gui
