// The views' registry: one row per view, every view made once with its row's id and title, and the default
// layout holding each view exactly once with a front tab in every panel that has views.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "views/registry.h"

namespace sparge::gui {
namespace {

TEST(ViewRegistry, IdsAreUniqueAndViewsCarryTheirRow) {
  const auto& rows = viewRegistry();
  ASSERT_EQ(rows.size(), 9u) << "the nine views of the product";
  std::set<std::string> ids;
  for (const ViewInfo& r : rows) EXPECT_TRUE(ids.insert(r.id).second) << "duplicate id " << r.id;
  const auto views = makeViews();
  ASSERT_EQ(views.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_STREQ(views[i]->id(), rows[i].id);
    EXPECT_STREQ(views[i]->title(), rows[i].title);
  }
  EXPECT_TRUE(isRegisteredView("kernels"));
  EXPECT_FALSE(isRegisteredView("kernel"));
}

TEST(ViewRegistry, DefaultPanelsHoldEveryViewOnce) {
  const auto panels = defaultPanels();
  ASSERT_EQ(panels.size(), 6u);
  std::map<std::string, int> seen;
  for (const PanelTabs& p : panels) {
    for (const std::string& v : p.views) ++seen[v];
    if (!p.views.empty()) {
      EXPECT_EQ(std::count(p.views.begin(), p.views.end(), p.active), 1) << p.active;
    }
  }
  for (const ViewInfo& r : viewRegistry()) EXPECT_EQ(seen[r.id], 1) << r.id;
  // The layout a first start shows (hand-written: heads and overview share the centre top).
  EXPECT_EQ(panels[2].views, (std::vector<std::string>{"heads", "overview"}));
  EXPECT_EQ(panels[2].active, "heads");
  EXPECT_EQ(panels[5].views, (std::vector<std::string>{"timings", "kernels"}));
}

}  // namespace
}  // namespace sparge::gui
