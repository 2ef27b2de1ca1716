// The menus, keyboard shortcuts and the shortcut help window, all generated from the command registry.
#include <GLFW/glfw3.h>
#include <imgui.h>

#include <cstring>

#include "app/app.h"

namespace sparge::gui {

namespace {
bool pressed(const Shortcut& k) {
  const ImGuiIO& io = ImGui::GetIO();
  return k.key && io.KeyCtrl == k.ctrl && io.KeyShift == k.shift && ImGui::IsKeyPressed(k.key, false);
}

// Keys that move the selection must not steal the arrows from a focused slider or text field.
bool isNavigation(CommandId id) {
  return id == CommandId::NextHead || id == CommandId::PreviousHead;
}
}  // namespace

void App::handleShortcuts() {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput || browser_.isOpen()) return;
  for (const CommandInfo& c : commands()) {
    if (isNavigation(c.id) && io.WantCaptureKeyboard && ImGui::IsAnyItemActive()) continue;
    for (const Shortcut& k : c.keys) {
      if (pressed(k)) {
        run(c.id);
        break;
      }
    }
  }
}

void App::drawMenuItems(const char* menu) {
  for (const CommandInfo& c : commands()) {
    if (!c.menu || std::strcmp(c.menu, menu) != 0) continue;
    std::string keys = shortcutText(c);
    if (ImGui::MenuItem(c.label, keys.empty() ? nullptr : keys.c_str(), false, enabled(c.id))) run(c.id);
  }
}

void App::drawRecentFiles() {
  if (!ImGui::BeginMenu("Open recent", !settings_.recentFiles.empty())) return;
  for (const auto& f : settings_.recentFiles) {
    if (ImGui::MenuItem(f.c_str())) {
      std::string copy = f;
      openFile(copy);
      break;
    }
  }
  ImGui::Separator();
  if (ImGui::MenuItem("Clear list")) settings_.recentFiles.clear();
  ImGui::EndMenu();
}

// Which panel each view sits in (the layout has no docking: views move between panels from here or from
// a tab's context menu).
void App::drawViewPlacement() {
  if (!ImGui::BeginMenu("Place views")) return;
  for (const auto& v : views_) {
    if (!ImGui::BeginMenu(v->title())) continue;
    int at = panels_.panelOf(v->id());
    for (int p = 0; p < PanelLayout::kPanels; ++p) {
      if (ImGui::MenuItem(PanelLayout::panelName(p), nullptr, p == at)) panels_.move(v->id(), p);
    }
    ImGui::EndMenu();
  }
  ImGui::EndMenu();
}

void App::drawMenu() {
  if (!ImGui::BeginMainMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    drawMenuItems("File");
    drawRecentFiles();
    if (ImGui::BeginMenu("Export", session_.runs().result() != nullptr)) {
      drawMenuItems("File/Export");
      ImGui::EndMenu();
    }
    ImGui::EndMenu();
  }
  for (const char* menu : {"Run", "Parameters", "View", "Help"}) {
    if (!ImGui::BeginMenu(menu)) continue;
    drawMenuItems(menu);
    if (std::strcmp(menu, "View") == 0) {
      ImGui::Separator();
      for (const auto& v : views_) {
        if (ImGui::MenuItem(v->title(), nullptr, panels_.inFront(v->id()))) panels_.show(v->id());
      }
      drawViewPlacement();
    }
    ImGui::EndMenu();
  }
  ImGui::EndMainMenuBar();
}

void App::drawShortcutHelp() {
  if (!showShortcuts_) return;
  ImGui::Begin("Keyboard shortcuts", &showShortcuts_, ImGuiWindowFlags_AlwaysAutoResize);
  for (const CommandInfo& c : commands()) {
    std::string keys = shortcutText(c);
    if (keys.empty()) continue;
    ImGui::TextUnformatted(keys.c_str());
    ImGui::SameLine(ImGui::GetFontSize() * 14);
    ImGui::TextDisabled("%s", c.help);
  }
  ImGui::TextUnformatted("wheel / drag / double-click");
  ImGui::SameLine(ImGui::GetFontSize() * 14);
  ImGui::TextDisabled("zoom / pan / reset the head panels");
  ImGui::End();
}

void App::drawAbout() {
  if (!showAbout_) return;
  ImGui::Begin("About Sparge Studio", &showAbout_, ImGuiWindowFlags_AlwaysAutoResize);
  ImGui::Text("Sparge Studio - SpargeAttn masks, errors and timings per head");
  ImGui::TextDisabled("Dear ImGui %s, GLFW %s", IMGUI_VERSION, glfwGetVersionString());
  ImGui::TextDisabled("%s", platform_.describe().c_str());
  ImGui::TextDisabled("Fonts: DejaVu (assets/fonts/LICENSE)");
  ImGui::End();
}

}  // namespace sparge::gui
