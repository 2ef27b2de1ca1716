// The tiled layout of the main window (no docking branch in Debian's ImGui): three columns of two panels
// with draggable splitters; each panel stacks one or more views as tabs. Which view sits where, which tab
// is in front and the splitter positions are kept in the app settings.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/uncovered.h"
#include "settings.h"
#include "views/view.h"

namespace sparge::gui {

class PanelLayout {
 public:
  static constexpr int kPanels = 6;
  PanelLayout(std::vector<std::unique_ptr<View>>& views, LayoutSettings& layout);

  // Draws the panels into the current window's content region.
  void draw(Session& session, UiState& ui);
  // The front views drawn by the last draw() and the time each took to build its ImGui lists, in ms.
  const std::vector<std::pair<const char*, double>>& viewTimes() const { return viewTimes_; }
  // The screen boxes the last draw() filled: panels (which draw no background of their own) and splitters.
  const std::vector<Box>& filled() const { return filled_; }
  // Brings view `id` to the front of its panel; false when there is no such view.
  bool show(const std::string& id);
  // True when `id` is the front tab of its panel (drawn every frame).
  bool inFront(const std::string& id) const;
  // Moves view `id` into panel `panel` (in front there).
  void move(const std::string& id, int panel);
  int panelOf(const std::string& id) const;
  void reset();                             // default sizes and placement
  static const char* panelName(int panel);  // "left top", ...
  // The panel named `name` ("centre-bottom" or "centre bottom"), or -1.
  static int panelByName(const std::string& name);
  // Settings from an older version or edited by hand: every view exactly once, else the defaults.
  void normalize();

 private:
  void drawPanel(int panel, float width, float height, Session& session, UiState& ui);
  void drawColumn(const char* id, int top, float width, float height, float* topRatio, Session& s,
                  UiState& ui);
  void tabMenu(const std::string& id);
  View* find(const std::string& id) const;

  std::vector<std::unique_ptr<View>>& views_;
  LayoutSettings& layout_;
  std::string pendingSelect_[kPanels];
  std::vector<std::pair<const char*, double>> viewTimes_;
  std::vector<Box> filled_;  // a tab to select programmatically next frame
};

}  // namespace sparge::gui
