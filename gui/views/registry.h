// The one list of the GUI's views: each row gives a view's id, tab title (also its View-menu entry), default
// panel and place there, and how to make it. Adding a view is its own file plus one row in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "settings.h"
#include "views/view.h"

namespace sparge::gui {

struct ViewInfo {
  const char* id;     // stable name: settings, `--action view=ID`
  const char* title;  // tab label and View-menu entry
  int panel;          // default panel, in PanelLayout's order (0 left top ... 5 right bottom)
  bool front;         // the tab in front of its default panel
  std::unique_ptr<View> (*make)();
};

// Every view, in tab order.
const std::vector<ViewInfo>& viewRegistry();

// One of each registered view, ids and titles set from its row.
std::vector<std::unique_ptr<View>> makeViews();

// Whether `id` names a registered view.
bool isRegisteredView(const std::string& id);

// The layout's panels with every view in its default panel (the layout of a first start, and of settings
// that do not hold every view once).
std::vector<PanelTabs> defaultPanels();

}  // namespace sparge::gui
