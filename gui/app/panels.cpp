#include "panels.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "views/registry.h"

namespace sparge::gui {

namespace {
// The last item's box, as the current window's clip rectangle shows it.
Box lastItemBox() {
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  const ImVec2 c0 = ImGui::GetWindowDrawList()->GetClipRectMin(),
               c1 = ImGui::GetWindowDrawList()->GetClipRectMax();
  return intersect({a.x, a.y, b.x, b.y}, {c0.x, c0.y, c1.x, c1.y});
}

// A draggable splitter of `thickness` x `length` at the cursor; `vertical` moves along x. Changes
// `*ratio` by the drag distance over `total`, clamped to [lo, hi].
void splitter(const char* id, bool vertical, float thickness, float length, float total, float* ratio,
              float lo, float hi, std::vector<Box>& filled, bool invert = false) {
  ImVec2 size = vertical ? ImVec2(thickness, length) : ImVec2(length, thickness);
  ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size);
  filled.push_back(lastItemBox());
  bool active = ImGui::IsItemActive();
  bool hovered = ImGui::IsItemHovered();
  if (hovered || active)
    ImGui::SetMouseCursor(vertical ? ImGuiMouseCursor_ResizeEW : ImGuiMouseCursor_ResizeNS);
  if (active && total > 0) {
    float d = vertical ? ImGui::GetIO().MouseDelta.x : ImGui::GetIO().MouseDelta.y;
    *ratio = std::clamp(*ratio + (invert ? -d : d) / total, lo, hi);
  }
  ImU32 col = active    ? IM_COL32(86, 156, 214, 255)
              : hovered ? IM_COL32(86, 156, 214, 140)
                        : IM_COL32(30, 33, 40, 255);
  ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + size.x, p.y + size.y), col);
}

constexpr float kGap = 5;

// Draws `v` and notes how long it took.
void drawTimed(View& v, Session& session, UiState& ui, std::vector<std::pair<const char*, double>>& times) {
  const auto t0 = std::chrono::steady_clock::now();
  v.draw(session, ui);
  times.emplace_back(
      v.id(), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}
}  // namespace

PanelLayout::PanelLayout(std::vector<std::unique_ptr<View>>& views, LayoutSettings& layout)
    : views_(views), layout_(layout) {
  normalize();
  for (int i = 0; i < kPanels; ++i) pendingSelect_[i] = layout_.panels[i].active;
}

const char* PanelLayout::panelName(int panel) {
  static const char* names[kPanels] = {"left top",      "left bottom", "centre top",
                                       "centre bottom", "right top",   "right bottom"};
  return panel >= 0 && panel < kPanels ? names[panel] : "?";
}

int PanelLayout::panelByName(const std::string& name) {
  std::string spaced = name;
  std::replace(spaced.begin(), spaced.end(), '-', ' ');
  for (int p = 0; p < kPanels; ++p) {
    if (spaced == panelName(p)) return p;
  }
  return -1;
}

View* PanelLayout::find(const std::string& id) const {
  for (const auto& v : views_) {
    if (id == v->id()) return v.get();
  }
  return nullptr;
}

void PanelLayout::normalize() {
  std::multiset<std::string> seen;
  bool ok = static_cast<int>(layout_.panels.size()) == kPanels;
  for (const auto& p : layout_.panels) {
    for (const auto& v : p.views) {
      seen.insert(v);
      ok = ok && find(v) != nullptr;
    }
  }
  for (const auto& v : views_) ok = ok && seen.count(v->id()) == 1;
  if (!ok) layout_.panels = defaultPanels();
  for (auto& p : layout_.panels) {
    if (std::find(p.views.begin(), p.views.end(), p.active) == p.views.end())
      p.active = p.views.empty() ? "" : p.views.front();
  }
}

int PanelLayout::panelOf(const std::string& id) const {
  for (int i = 0; i < kPanels; ++i) {
    const auto& v = layout_.panels[i].views;
    if (std::find(v.begin(), v.end(), id) != v.end()) return i;
  }
  return -1;
}

bool PanelLayout::show(const std::string& id) {
  int p = panelOf(id);
  if (p < 0) return false;
  layout_.panels[p].active = id;
  pendingSelect_[p] = id;
  return true;
}

bool PanelLayout::inFront(const std::string& id) const {
  int p = panelOf(id);
  return p >= 0 && layout_.panels[p].active == id;
}

void PanelLayout::move(const std::string& id, int panel) {
  int from = panelOf(id);
  if (from < 0 || panel < 0 || panel >= kPanels || from == panel) return;
  auto& src = layout_.panels[from].views;
  src.erase(std::find(src.begin(), src.end(), id));
  layout_.panels[panel].views.push_back(id);
  normalize();
  show(id);
  if (!src.empty()) show(layout_.panels[from].active);
}

void PanelLayout::reset() {
  layout_ = LayoutSettings{};
  for (int i = 0; i < kPanels; ++i) pendingSelect_[i] = layout_.panels[i].active;
}

void PanelLayout::tabMenu(const std::string& id) {
  if (!ImGui::BeginPopupContextItem()) return;
  ImGui::TextDisabled("Move to");
  for (int p = 0; p < kPanels; ++p) {
    if (ImGui::MenuItem(panelName(p), nullptr, p == panelOf(id))) move(id, p);
  }
  ImGui::EndPopup();
}

void PanelLayout::drawPanel(int panel, float width, float height, Session& session, UiState& ui) {
  PanelTabs& tabs = layout_.panels[panel];
  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(6, 4));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(6, 4));
  ImGui::PushID(panel);
  ImGui::BeginChild("##panel", ImVec2(width, height), false, ImGuiWindowFlags_AlwaysUseWindowPadding);
  if (tabs.views.size() == 1) {
    if (View* v = find(tabs.views.front())) drawTimed(*v, session, ui, viewTimes_);
  } else if (!tabs.views.empty() && ImGui::BeginTabBar("##tabs")) {
    for (const auto& id : tabs.views) {
      View* v = find(id);
      if (!v) continue;
      // A tab selected by a command opens a frame later; until then the panel's front view stays what the
      // command made it.
      bool select = pendingSelect_[panel] == id;
      std::string label = std::string(v->title()) + "###" + id;
      bool open = ImGui::BeginTabItem(label.c_str(), nullptr, select ? ImGuiTabItemFlags_SetSelected : 0);
      tabMenu(id);
      if (open) {
        if (pendingSelect_[panel].empty() || select) {
          tabs.active = id;
          pendingSelect_[panel].clear();
        }
        drawTimed(*v, session, ui, viewTimes_);
        ImGui::EndTabItem();
      }
    }
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  filled_.push_back(lastItemBox());
  ImGui::PopID();
  ImGui::PopStyleVar(2);
}

void PanelLayout::drawColumn(const char* id, int top, float width, float height, float* topRatio, Session& s,
                             UiState& ui) {
  ImGui::BeginGroup();
  float topH = std::floor((height - kGap) * *topRatio);
  drawPanel(top, width, topH, s, ui);
  splitter(id, false, kGap, width, height, topRatio, 0.12f, 0.88f, filled_);
  drawPanel(top + 1, width, height - topH - kGap, s, ui);
  ImGui::EndGroup();
}

void PanelLayout::draw(Session& session, UiState& ui) {
  viewTimes_.clear();
  filled_.clear();
  ImVec2 avail = ImGui::GetContentRegionAvail();
  float W = avail.x, H = avail.y;
  float leftW = std::floor(W * layout_.leftWidth), rightW = std::floor(W * layout_.rightWidth);
  float centerW = W - leftW - rightW - 2 * kGap;
  drawColumn("##lsplit", 0, leftW, H, &layout_.leftTopHeight, session, ui);
  ImGui::SameLine(0, 0);
  splitter("##lv", true, kGap, H, W, &layout_.leftWidth, 0.12f, 0.4f, filled_);
  ImGui::SameLine(0, 0);
  drawColumn("##csplit", 2, centerW, H, &layout_.gridHeight, session, ui);
  ImGui::SameLine(0, 0);
  splitter("##rv", true, kGap, H, W, &layout_.rightWidth, 0.15f, 0.45f, filled_, true);
  ImGui::SameLine(0, 0);
  drawColumn("##rsplit", 4, rightW, H, &layout_.rightTopHeight, session, ui);
}

}  // namespace sparge::gui
