// The main window's background painted only where the panels leave it uncovered (checked pixel by pixel
// against a grid), and the pacing of frames: when the UI thread draws at once, waits for a run it just
// scheduled, or sleeps until input or a result.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "app/frame_pacing.h"
#include "app/uncovered.h"

namespace sparge::gui {
namespace {

// How many boxes cover each pixel of a w x h grid (integer boxes).
std::vector<int> coverCount(int w, int h, const std::vector<Box>& boxes) {
  std::vector<int> n(size_t(w) * h, 0);
  for (const Box& b : boxes)
    for (int y = int(b.y0); y < int(b.y1); ++y)
      for (int x = int(b.x0); x < int(b.x1); ++x)
        if (x >= 0 && y >= 0 && x < w && y < h) ++n[size_t(y) * w + x];
  return n;
}

TEST(Uncovered, FrameAroundOneBox) {
  const std::vector<Box> parts = uncoveredParts({0, 0, 10, 10}, {{2, 2, 8, 8}});
  const std::vector<Box> expected = {{0, 0, 10, 2}, {0, 2, 2, 8}, {8, 2, 10, 8}, {0, 8, 10, 10}};
  EXPECT_EQ(parts, expected);
}

TEST(Uncovered, NothingLeftWhenCoveredAndAllWhenNothingIs) {
  EXPECT_TRUE(uncoveredParts({0, 0, 4, 4}, {{-1, -1, 5, 5}}).empty());
  const std::vector<Box> whole = {{0, 0, 4, 4}};
  EXPECT_EQ(uncoveredParts({0, 0, 4, 4}, {}), whole);
  EXPECT_EQ(uncoveredParts({0, 0, 4, 4}, {{5, 5, 9, 9}, {1, 1, 1, 3}}), whole);  // outside; empty
  EXPECT_TRUE(uncoveredParts({3, 3, 3, 9}, {}).empty());
}

TEST(Uncovered, StackedPanelsWithGapsAsThePanelLayoutLeavesThem) {
  // Two columns of two panels, 1-pixel gaps between the panels of a column and a 2-pixel margin around.
  const std::vector<Box> panels = {{2, 2, 10, 8}, {2, 9, 10, 18}, {10, 2, 18, 12}, {10, 13, 18, 18}};
  const std::vector<Box> parts = uncoveredParts({0, 0, 20, 20}, panels);
  const std::vector<int> n = coverCount(20, 20, parts), p = coverCount(20, 20, panels);
  for (int i = 0; i < 400; ++i) EXPECT_EQ(n[i], p[i] ? 0 : 1) << "pixel " << i % 20 << "," << i / 20;
}

TEST(Uncovered, BandsWithTheSameSpansAreMerged) {
  // Two boxes stacked on one column: the strips either side run the full height as one box each.
  const std::vector<Box> parts = uncoveredParts({0, 0, 10, 10}, {{2, 0, 8, 5}, {2, 5, 8, 10}});
  const std::vector<Box> expected = {{0, 0, 2, 10}, {8, 0, 10, 10}};
  EXPECT_EQ(parts, expected);
}

TEST(Uncovered, RandomBoxesAgainstAPixelGrid) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> coord(-3, 33);
  for (int round = 0; round < 200; ++round) {
    std::vector<Box> covered;
    const int count = round % 7;
    for (int k = 0; k < count; ++k) {
      int x0 = coord(rng), x1 = coord(rng), y0 = coord(rng), y1 = coord(rng);
      covered.push_back({float(std::min(x0, x1)), float(std::min(y0, y1)), float(std::max(x0, x1)),
                         float(std::max(y0, y1))});
    }
    const std::vector<Box> parts = uncoveredParts({0, 0, 30, 30}, covered);
    const std::vector<int> n = coverCount(30, 30, parts), c = coverCount(30, 30, covered);
    for (int i = 0; i < 900; ++i) ASSERT_EQ(n[i], c[i] ? 0 : 1) << "round " << round << " pixel " << i;
    for (const Box& b : parts) ASSERT_FALSE(b.empty());
  }
}

TEST(FramePacing, SettlesThenSleepsUntilWoken) {
  FramePacer p;
  PacingState s;
  for (int i = 0; i < FramePacer::kSettleFrames; ++i) EXPECT_EQ(p.next(s), 0.0) << "first frames";
  EXPECT_EQ(p.next(s), FramePacer::kIdleS);
  s.activity = true;  // a click
  EXPECT_EQ(p.next(s), 0.0);
  s.activity = false;
  for (int i = 1; i < FramePacer::kSettleFrames; ++i) EXPECT_EQ(p.next(s), 0.0);
  EXPECT_EQ(p.next(s), FramePacer::kIdleS);
  s.resultsWaiting = true;  // a result never waits for a timeout
  EXPECT_EQ(p.next(s), 0.0);
}

TEST(FramePacing, AfterASliderMoveSettlingFramesWaitForItsRun) {
  FramePacer p;
  PacingState s;
  s.activity = s.runScheduled = s.runInFlight = true;
  EXPECT_EQ(p.next(s), FramePacer::kRunWaitS);
  s.activity = s.runScheduled = false;
  for (int i = 1; i < FramePacer::kSettleFrames; ++i) EXPECT_EQ(p.next(s), FramePacer::kRunWaitS);
  // The result lands: its frame and the settling ones after it are drawn at once.
  s.runInFlight = false;
  s.resultsWaiting = true;
  EXPECT_EQ(p.next(s), 0.0);
  s.resultsWaiting = false;
  s.activity = true;  // the frame that applied it
  for (int i = 0; i < FramePacer::kSettleFrames; ++i) {
    EXPECT_EQ(p.next(s), 0.0);
    s.activity = false;
  }
}

TEST(FramePacing, InputDuringARunItDidNotScheduleIsNotHeldBack) {
  FramePacer p;
  PacingState s;
  s.runInFlight = s.busy = true;  // a long run started earlier
  s.activity = true;              // a menu opens
  for (int i = 0; i < FramePacer::kSettleFrames; ++i) {
    EXPECT_EQ(p.next(s), 0.0);
    s.activity = false;
  }
  EXPECT_EQ(p.next(s), FramePacer::kBusyS);  // the spinner keeps turning
}

TEST(FramePacing, HeldKeysAndTextFieldsWakeSoonerThanIdle) {
  FramePacer p;
  PacingState s;
  for (int i = 0; i < FramePacer::kSettleFrames; ++i) p.next(s);
  s.textInput = true;
  EXPECT_EQ(p.next(s), FramePacer::kTextInputS);
  s.held = true;
  EXPECT_EQ(p.next(s), FramePacer::kHeldS);
  EXPECT_LT(FramePacer::kHeldS, FramePacer::kIdleS);
  EXPECT_LT(FramePacer::kTextInputS, FramePacer::kIdleS);
}

TEST(FramePacing, OnlyAFrameThatScheduledAFastRunIsLeftUndrawnAndNeverTwoInARow) {
  FramePacer p;
  EXPECT_FALSE(p.deferFrame(false, 0.01)) << "nothing scheduled";
  EXPECT_FALSE(p.deferFrame(true, 2 * FramePacer::kRunWaitS)) << "the last run was slow";
  EXPECT_TRUE(p.deferFrame(true, 0.01));
  EXPECT_FALSE(p.deferFrame(true, 0.01)) << "a drag still shows every other frame";
  EXPECT_TRUE(p.deferFrame(true, 0.01));
  EXPECT_FALSE(p.deferFrame(false, 0.01));
  EXPECT_TRUE(p.deferFrame(true, 0.0)) << "no run yet";
}

}  // namespace
}  // namespace sparge::gui
