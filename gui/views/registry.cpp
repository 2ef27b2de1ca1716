// The views' registry (registry.h).
#include "views/registry.h"

#include "app/panels.h"
#include "views/capture_browser.h"
#include "views/controls_view.h"
#include "views/curves_view.h"
#include "views/head_detail.h"
#include "views/head_grid.h"
#include "views/kernel_view.h"
#include "views/overview_view.h"
#include "views/summary_table.h"
#include "views/timings_view.h"

namespace sparge::gui {
namespace {

template <class V>
std::unique_ptr<View> make() {
  return std::make_unique<V>();
}

// Panels: 0 left top, 1 left bottom, 2 centre top, 3 centre bottom, 4 right top, 5 right bottom.
const std::vector<ViewInfo> kViews = {
    // id         title          panel front  factory
    {"capture", "Capture", 0, true, make<CaptureBrowser>},
    {"controls", "Controls", 1, true, make<ControlsView>},
    {"heads", "Heads", 2, true, make<HeadGrid>},
    {"overview", "Overview", 2, false, make<OverviewView>},
    {"detail", "Head detail", 3, true, make<HeadDetail>},
    {"curves", "Curves", 3, false, make<CurvesView>},
    {"summary", "Summary", 4, true, make<SummaryTable>},
    {"timings", "Timings", 5, true, make<TimingsView>},
    {"kernels", "Kernels", 5, false, make<KernelView>},
};

}  // namespace

const std::vector<ViewInfo>& viewRegistry() {
  return kViews;
}

std::vector<std::unique_ptr<View>> makeViews() {
  std::vector<std::unique_ptr<View>> views;
  for (const ViewInfo& info : kViews) {
    views.push_back(info.make());
    views.back()->id_ = info.id;
    views.back()->title_ = info.title;
  }
  return views;
}

bool isRegisteredView(const std::string& id) {
  for (const ViewInfo& info : kViews)
    if (id == info.id) return true;
  return false;
}

std::vector<PanelTabs> defaultPanels() {
  std::vector<PanelTabs> panels(PanelLayout::kPanels);
  for (const ViewInfo& info : kViews) {
    PanelTabs& p = panels[size_t(info.panel)];
    p.views.push_back(info.id);
    if (info.front) p.active = info.id;
  }
  return panels;
}

}  // namespace sparge::gui
