// Summary statistics: odd and even counts, single value, empty input.
#include <gtest/gtest.h>

#include "sparge/profiler/stats.h"

using sparge::prof::computeStats;

TEST(Stats, OddCount) {
  auto s = computeStats({3.0, 1.0, 2.0, 10.0, 4.0});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.median, 3.0);
  EXPECT_DOUBLE_EQ(s.max, 10.0);
  EXPECT_DOUBLE_EQ(s.total, 20.0);
  EXPECT_DOUBLE_EQ(s.mean, 4.0);
}

TEST(Stats, EvenCountMedianIsMeanOfMiddlePair) {
  auto s = computeStats({4.0, 1.0, 3.0, 2.0});
  EXPECT_EQ(s.count, 4);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 4.0);
  EXPECT_DOUBLE_EQ(s.total, 10.0);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
}

TEST(Stats, StandardDeviation) {
  auto s = computeStats({2, 4, 4, 4, 5, 5, 7, 9});  // textbook example: population sd 2
  EXPECT_DOUBLE_EQ(s.stddev, 2.0);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
}

TEST(Stats, SingleAndEmpty) {
  auto one = computeStats({7.5});
  EXPECT_EQ(one.count, 1);
  EXPECT_DOUBLE_EQ(one.min, 7.5);
  EXPECT_DOUBLE_EQ(one.median, 7.5);
  EXPECT_DOUBLE_EQ(one.max, 7.5);
  EXPECT_DOUBLE_EQ(one.stddev, 0.0);
  auto none = computeStats({});
  EXPECT_EQ(none.count, 0);
  EXPECT_DOUBLE_EQ(none.total, 0.0);
  EXPECT_DOUBLE_EQ(none.median, 0.0);
}
