// Worker: coalescing (latest wins), cancellation of the running job, error reporting.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "worker.h"

using namespace sparge;
using namespace std::chrono_literals;

TEST(Worker, PendingJobsOfOneKeyCoalesceLatestWins) {
  gui::Worker w;
  std::atomic<bool> release{false};
  std::mutex m;
  std::vector<int> ran;
  w.submit("block", [&](const core::CancelFlag&) {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  while (w.runningKey() != "block") std::this_thread::sleep_for(1ms);
  for (int i = 0; i < 5; ++i) {
    w.submit("run", [&, i](const core::CancelFlag&) {
      std::lock_guard lock(m);
      ran.push_back(i);
    });
  }
  EXPECT_EQ(w.pendingCount(), 1u);
  release = true;
  ASSERT_TRUE(w.waitIdle(5s));
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_EQ(ran[0], 4);
  EXPECT_EQ(w.coalescedCount(), 4u);
}

TEST(Worker, NewJobOfSameKeyCancelsTheRunningOne) {
  gui::Worker w;
  std::atomic<int> finished{0};
  std::atomic<bool> started{false};
  w.submit("run", [&](const core::CancelFlag& cancel) {
    started = true;
    for (int i = 0; i < 5000; ++i) {
      if (cancel) throw core::Cancelled();
      std::this_thread::sleep_for(1ms);
    }
    ++finished;
  });
  while (!started) std::this_thread::sleep_for(1ms);
  w.submit("run", [&](const core::CancelFlag&) { finished += 10; });
  ASSERT_TRUE(w.waitIdle(5s));
  EXPECT_EQ(finished.load(), 10);
  EXPECT_EQ(w.cancelledCount(), 1u);
}

TEST(Worker, CancelDropsPendingAndStopsRunning) {
  gui::Worker w;
  std::atomic<bool> started{false};
  std::atomic<bool> secondRan{false};
  w.submit("tune", [&](const core::CancelFlag& cancel) {
    started = true;
    while (!cancel) std::this_thread::sleep_for(1ms);
    throw core::Cancelled();
  });
  while (!started) std::this_thread::sleep_for(1ms);
  w.submit("tune", [&](const core::CancelFlag&) { secondRan = true; }, false);
  w.cancel("tune");
  ASSERT_TRUE(w.waitIdle(5s));
  EXPECT_FALSE(secondRan.load());
  EXPECT_EQ(w.cancelledCount(), 1u);
}

TEST(Worker, ErrorsReachTheSinkAndTheThreadSurvives) {
  gui::Worker w;
  std::string got;
  std::mutex m;
  w.setErrorSink([&](const std::string& key, const std::string& msg) {
    std::lock_guard lock(m);
    got = key + ": " + msg;
  });
  w.submit("open", [](const core::CancelFlag&) { throw std::runtime_error("bad file"); });
  std::atomic<bool> after{false};
  w.submit("next", [&](const core::CancelFlag&) { after = true; });
  ASSERT_TRUE(w.waitIdle(5s));
  EXPECT_EQ(got, "open: bad file");
  EXPECT_TRUE(after.load());
}
