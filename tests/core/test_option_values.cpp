// Option values and the guards behind them: checked numbers, output paths, display of long strings,
// overflow-checked shapes and synthetic specs, the thread pool's cap and its failed thread starts, and the
// warning for rows that see no key.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cfloat>
#include <chrono>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>

#include "isolated.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/checked_math.h"
#include "sparge/core/memory_guard.h"
#include "sparge/core/names.h"
#include "sparge/core/option_values.h"
#include "sparge/core/parallel.h"
#include "sparge/core/result.h"
#include "sparge/core/synthetic.h"
#include "test_util.h"

using namespace sparge::core;
using sparge::Error;
using sparge::test::expectError;
using sparge::test::TempDir;

TEST(OptionValues, RealNumbersMustBeWholeFiniteAndInRange) {
  EXPECT_EQ(parseReal("0.5", "--theta"), 0.5);
  EXPECT_EQ(parseReal("-2e3", "--theta"), -2000.0);
  EXPECT_EQ(parseReal("1", "--tau", 0, 1), 1.0);
  for (const char* bad : {"", " 1", "1 ", "1x", "nan", "NaN", "inf", "-inf", "infinity", "1e400", "-1e400"})
    expectError([&] { parseReal(bad, "--theta"); }, {"--theta"});
  expectError([&] { parseReal("1.5", "--tau", 0, 1); }, {"--tau", "'1.5' is out of range", "in [0, 1]"});
  expectError([&] { parseReal("", "--tau"); }, {"--tau", "empty"});
  // Below the smallest normal number is still a finite number.
  EXPECT_GT(parseReal("1e-310", "--l1"), 0.0);
}

TEST(OptionValues, IntegersAreDecimalAndNeverWrap) {
  EXPECT_EQ(parseInteger("42", "--heads"), 42);
  EXPECT_EQ(parseInteger("-7", "--x"), -7);
  EXPECT_EQ(parseInteger("9223372036854775807", "--x"), INT64_MAX);
  for (const char* bad : {"", "1.5", "0x10", "1e3", " 3", "+", "-", "9223372036854775808"})
    expectError([&] { parseInteger(bad, "--threads"); }, {"--threads"});
  expectError([&] { parseInteger("-1", "--threads", 0, 64); },
              {"--threads", "'-1' is out of range", "0 … 64"});
  EXPECT_EQ(parseUnsigned("18446744073709551615", "--seed"), UINT64_MAX);
  expectError([&] { parseUnsigned("-1", "--seed"); }, {"--seed", "negative"});
  expectError([&] { parseUnsigned("18446744073709551616", "--seed"); }, {"--seed", "out of range"});
}

TEST(OptionValues, ByteSizesBeyondEveryMachineAreRefused) {
  EXPECT_EQ(parseByteSize("1T", "--max-memory"), 1024.0 * 1024 * 1024 * 1024);
  for (const char* bad : {"1e300t", "inf", "2048P", "1e19", "0.5", ""})
    expectError([&] { parseByteSize(bad, "--max-memory"); }, {"--max-memory"});
  expectError([&] { parseByteSize("1e300t", "--max-memory"); }, {"more than any machine's memory"});
}

TEST(OptionValues, OutputFormatsByTheLongestEnding) {
  const std::vector<std::string> timings{".json", ".csv", ".trace.json"};
  EXPECT_EQ(outputFormat("t.trace.json", timings), ".trace.json");
  EXPECT_EQ(outputFormat("T.JSON", timings), ".json");
  EXPECT_EQ(outputFormat("t.xyz", timings), "");
  EXPECT_EQ(outputFormat(".json", timings), "");  // a hidden name with no stem is no report
  EXPECT_EQ(formatList({".json", ".csv", ".md"}), ".json, .csv or .md");
}

TEST(OptionValues, OutputPathsCheckedBeforeTheWork) {
  TempDir dir;
  expectError(
      [&] {
        checkOutputPath(dir.file("t.xyz"), "--timings", {".json", ".csv"});
      },
      {"--timings", "unknown format", ".json or .csv"});
  expectError([&] { checkOutputPath("", "--report"); }, {"--report", "empty"});
  const std::string longName = std::string(300, 'r') + ".json";
  expectError([&] { checkOutputPath(dir.file(longName), "--report", {".json"}); },
              {"--report", "the file name is 305 bytes long", "(", "bytes)"});
  expectError([&] { checkOutputPath(dir.file("missing/r.json"), "--report", {".json"}); },
              {"does not exist"});
  EXPECT_NO_THROW(checkOutputPath(dir.file(std::string(250, 'n') + ".json"), "--report", {".json"}));
  // The longest name the file system takes can be written: its temporary's name is kept short.
  const std::string longest = dir.file(std::string(250, 'n') + ".json");
  writeTextAtomically(longest, "{}");
  EXPECT_TRUE(std::ifstream(longest).good());
}

TEST(OptionValues, LongStringsAreShortenedForDisplay) {
  EXPECT_EQ(shortForDisplay("layer.3"), "layer.3");
  const std::string module = "model.layers.0." + std::string(10 << 20, 'x') + ".self_attn";
  const std::string shown = shortForDisplay(module);
  EXPECT_LT(shown.size(), 200u);
  EXPECT_EQ(shown.rfind("model.layers.0.", 0), 0u);
  EXPECT_NE(shown.find("x…x"), std::string::npos);  // 80 bytes from the start, 40 from the end
  EXPECT_NE(shown.find("x.self_attn (" + std::to_string(module.size()) + " bytes)"), std::string::npos);
  // No UTF-8 sequence is cut, and control characters stay escaped.
  const std::string greek =
      std::string(50, 'a') + std::string(100, '\x1b') + "ααααααααααααααααααααααααααααααα";
  const std::string g = shortForDisplay(greek, 40);
  EXPECT_TRUE(isValidUtf8(g));
  EXPECT_EQ(g.find('\x1b'), std::string::npos);
}

TEST(CheckedMath, ProductsSumsAndCeilDivNearTheLimit) {
  EXPECT_EQ(checkedProduct({4, 8, 2}), 64);
  EXPECT_FALSE(checkedProduct({int64_t(1) << 32, int64_t(1) << 32}));  // 2^64 wraps to 0 unchecked
  EXPECT_FALSE(checkedProduct({-1, 2}));
  EXPECT_FALSE(checkedProduct({1 << 20, 1 << 20}, int64_t(1) << 39));
  EXPECT_FALSE(checkedSum(INT64_MAX, 1));
  EXPECT_EQ(ceilDiv(INT64_MAX, INT64_MAX), 1);  // (a + b − 1) / b would overflow
  EXPECT_EQ(ceilDiv(300, INT64_MAX), 1);
  EXPECT_EQ(ceilDiv(1000, 64), 16);
  EXPECT_EQ(ceilDiv(1024, 64), 16);
}

TEST(Synthetic, SpecsBeyondTheShapeLimitsAreNamed) {
  SynthSpec s;
  s.batch = s.headsQ = s.headsKV = int64_t(1) << 32;  // B·H·N·D = 2^64: wraps to 0 unchecked
  s.tokensQ = s.tokensKV = s.headDim = s.headDimV = 1;
  EXPECT_EQ(synthSpecProblem(s).field, "batch");
  s.batch = s.headsQ = s.headsKV = kMaxDimension;
  EXPECT_EQ(synthSpecProblem(s).field, "batch/heads/tokens/dim");
  expectError([&] { makeSyntheticEntry(s); }, {"synthetic capture", "more than any machine holds"});
  SynthSpec t;
  t.segment = INT64_MAX;  // N + segment − 1 overflowed
  EXPECT_EQ(synthSpecProblem(t).field, "");
  const EntryData e = makeSyntheticEntry(t);
  EXPECT_EQ(int64_t(e.q.size()), t.batch * t.headsQ * t.tokensQ * t.headDim);
  t.segment = 0;
  EXPECT_EQ(synthSpecProblem(t).field, "segment");
  for (double bad : {-1.0, double(NAN), double(INFINITY), 1e30, kMaxSharpness * 1.01}) {
    SynthSpec u;
    u.sharpness = bad;
    EXPECT_EQ(synthSpecProblem(u).field, "sharpness") << bad;
  }
  SynthSpec gqa;
  gqa.headsQ = 6;
  gqa.headsKV = 4;
  EXPECT_EQ(synthSpecProblem(gqa).field, "kv-heads");
}

TEST(Synthetic, TheLargestSharpnessStaysFiniteInFloat16) {
  SynthSpec s;
  s.headsQ = s.headsKV = 2;
  s.tokensQ = s.tokensKV = 128;
  s.headDim = s.headDimV = 4096;
  s.sharpness = kMaxSharpness;
  const EntryData e = makeSyntheticEntry(s);
  for (const auto* t : {&e.q, &e.k, &e.v})
    for (float x : *t) ASSERT_TRUE(std::isfinite(x));
}

TEST(ThreadPool, CapsThreadsAtWhatTheMachineRuns) {
  EXPECT_EQ(usableThreads(0), hardwareThreads());
  EXPECT_EQ(usableThreads(1), 1);
  EXPECT_EQ(usableThreads(1000000), maxThreads());
  EXPECT_EQ(maxThreads(), kThreadsPerHardwareThread * hardwareThreads());
  std::vector<int> done(1000, 0);
  parallelFor(1000, 1000000, [&](int64_t i) { done[size_t(i)] = 1; });
  for (int d : done) EXPECT_EQ(d, 1);
}

TEST(ThreadPool, AFailedThreadStartIsAnErrorNotAnAbort) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "an address-space limit and AddressSanitizer's shadow memory do not mix";
#else
  // In a child: an address space with room for little more than what is mapped, so thread stacks (8 MiB
  // each) cannot all be mapped. The pool must throw sparge::Error (not terminate) and join what started.
  const IsolatedResult r = runIsolated(
      [] {
        std::ifstream status("/proc/self/status");
        std::string line;
        long long vmKb = 0;
        while (std::getline(status, line))
          if (line.rfind("VmSize:", 0) == 0) vmKb = std::stoll(line.substr(7));
        const rlim_t limit = rlim_t(vmKb + 12 * 1024) * 1024;
        struct rlimit rl {
          limit, limit
        };
        if (setrlimit(RLIMIT_AS, &rl) != 0) return;
        try {
          // Each task outlives the next thread's start, so no stack of an ended thread can be reused.
          parallelFor(64, 64, [](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
        } catch (const Error& e) {
          if (std::string(e.what()).find("could not start thread") != std::string::npos) return;
        }
        if (maxThreads() * 8 > 12) throw std::runtime_error("no thread failed to start");
      },
      60);
  EXPECT_EQ(r.outcome, IsolatedOutcome::Finished) << "signal " << r.signal;
#endif
}

TEST(EmptyRows, TheWindowsRowsAreToldApartFromTheSelections) {
  EntryResult r;
  r.info.tokensQ = 512;
  r.info.tokensKV = 128;
  r.info.window = Window{64, 0};
  // Oracle: query t sees keys max(0, t − 64) … min(127, t).
  int64_t oracle = 0;
  for (int64_t t = 0; t < 512; ++t) oracle += std::max<int64_t>(0, t - 64) > std::min<int64_t>(127, t);
  EXPECT_EQ(rowsWithoutKeys(r.info), oracle);
  HeadResult h;
  h.emptyRows = oracle;
  r.config.sink = true;
  std::string w = emptyRowsWarning(r, h, oracle);
  EXPECT_NE(w.find(std::to_string(oracle) + " query rows have no key inside their window [64, 0]"),
            std::string::npos)
      << w;
  EXPECT_EQ(w.find("--sink"), std::string::npos) << w;
  // Rows the selection empties in a left-bounded window: the sink's block 0 lies outside it.
  r.config.sink = false;
  h.emptyRows = oracle + 5;
  w = emptyRowsWarning(r, h, oracle);
  EXPECT_NE(w.find("5 query rows see no key in their selected blocks"), std::string::npos) << w;
  EXPECT_EQ(w.find("--sink"), std::string::npos) << w;
  EXPECT_NE(w.find("--diagonal"), std::string::npos) << w;
  // Causal without a window: the sink helps.
  EntryResult c;
  c.info.tokensQ = c.info.tokensKV = 256;
  c.info.causal = true;
  EXPECT_EQ(rowsWithoutKeys(c.info), 0);
  h.emptyRows = 3;
  w = emptyRowsWarning(c, h, 0);
  EXPECT_NE(
      w.find("3 query rows see no key in their selected blocks (output set to 0; --sink keeps key block 0"),
      std::string::npos)
      << w;
}
