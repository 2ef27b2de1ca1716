// Mixed numerics per head (the exact fallback): a run whose heads use different numerics gives each head
// exactly what a run of that numerics alone gives it, natively (CPU engine) and as one run per numerics
// (runByNumerics, the CUDA engine's way); parameter files carry the per-head numerics into RunConfig.
#include <gtest/gtest.h>

#include "sparge/core/cpu_engine.h"
#include "sparge/core/params_io.h"
#include "sparge/core/run_request.h"
#include "sparge/core/synthetic.h"

using namespace sparge::core;

namespace {

std::shared_ptr<EntryData> outlierEntry() {
  SynthSpec s;
  s.headsQ = 4;
  s.headsKV = 2;
  s.tokensQ = s.tokensKV = 384;
  s.headDim = s.headDimV = 64;
  s.segment = 128;
  s.outlierKvHeads = {1};  // query heads 2 and 3
  s.seed = 3;
  return std::make_shared<EntryData>(makeSyntheticEntry(s));
}

RunConfig baseConfig() {
  RunConfig c;
  c.numerics = Numerics::Int8Fp8;
  c.defaults.theta = -0.1;
  c.defaults.tau = 0.9;
  c.defaults.lambda = 4;
  return c;
}

void expectSameHead(const HeadResult& a, const HeadResult& b, const std::string& what) {
  EXPECT_EQ(a.blockMask, b.blockMask) << what;
  EXPECT_EQ(a.pvSkipped, b.pvSkipped) << what;
  EXPECT_EQ(a.output, b.output) << what;
  EXPECT_EQ(a.error.absDiff, b.error.absDiff) << what;
  EXPECT_EQ(a.errorSparse.absDiff, b.errorSparse.absDiff) << what;
  EXPECT_EQ(a.errorQuant.absDiff, b.errorQuant.absDiff) << what;
  EXPECT_EQ(a.errorQuant.count, b.errorQuant.count) << what;
}

TEST(MixedNumerics, EachHeadAsInAUniformRun) {
  auto entry = outlierEntry();
  RunOptions ro;
  ro.keepOutput = true;
  RunConfig mixed = baseConfig();
  mixed.perHeadNumerics = {Numerics::Int8Fp8, Numerics::None, Numerics::None, Numerics::Int8Fp8};
  ASSERT_TRUE(mixed.mixedNumerics());
  RunConfig quant = baseConfig(), exact = baseConfig();
  exact.numerics = Numerics::None;
  CpuEngine engine(2);
  engine.setEntry(entry);
  const EntryResult m = engine.run(mixed, ro);
  // Fresh engines for the uniform runs: nothing cached by the mixed run can leak into them.
  CpuEngine e1(2), e2(2);
  e1.setEntry(entry);
  e2.setEntry(entry);
  const EntryResult q = e1.run(quant, ro), x = e2.run(exact, ro);
  ASSERT_EQ(m.heads.size(), 4u);
  for (const HeadResult& h : m.heads) {
    const bool isExact = mixed.numericsFor(h.head) == Numerics::None;
    const HeadResult& want = *(isExact ? x : q).find(0, h.head);
    expectSameHead(h, want, "head " + std::to_string(h.head));
    if (isExact) {
      EXPECT_EQ(h.errorQuant.count, 0) << "an exact head has no quantization part";
    }
  }
  // The way an engine of one numerics per call runs it gives the same, under the mixed configuration.
  const EntryResult split = runByNumerics(engine, mixed, ro);
  EXPECT_EQ(split.config.perHeadNumerics, mixed.perHeadNumerics);
  ASSERT_EQ(split.heads.size(), m.heads.size());
  for (size_t i = 0; i < m.heads.size(); ++i) {
    EXPECT_EQ(split.heads[i].head, m.heads[i].head);
    expectSameHead(split.heads[i], m.heads[i], "split head " + std::to_string(m.heads[i].head));
  }
  EXPECT_EQ(split.error.absDiff, m.error.absDiff);
}

TEST(MixedNumerics, OutlierKeysBreakInt8QkOnlyWhereThey) {
  auto entry = outlierEntry();
  CpuEngine engine(2);
  engine.setEntry(entry);
  RunConfig c = baseConfig();
  c.defaults.dense = true;
  RunOptions ro;
  ro.quantBreakdown = true;
  const EntryResult r = engine.run(c, ro);
  for (const HeadResult& h : r.heads) {
    ASSERT_GT(h.errorQuantQk.count, 0);
    // Exact attention does not see channel 0 of the outlier heads (Q is 0 there), but their INT8 K scale
    // is 150 / 127 for every block: Q·Kᵀ loses most of its precision.
    if (h.head >= 2) {
      EXPECT_GT(h.errorQuantQk.l1(), 0.1) << "head " << h.head;
      EXPECT_GT(h.errorQuant.l1(), 0.1) << "head " << h.head;
    } else {
      EXPECT_LT(h.errorQuantQk.l1(), 0.02) << "head " << h.head;
    }
  }
  // Without the breakdown, nothing is measured (count 0) and nothing was computed for it.
  const EntryResult plain = engine.run(c, RunOptions{});
  for (const HeadResult& h : plain.heads) EXPECT_EQ(h.errorQuantQk.count, 0);
}

TEST(MixedNumerics, ParamsFileCarriesHeadNumerics) {
  const std::string text = R"({"sparge_params_version": 1, "mode": "cdf", "l1": 0.05, "l2": 0.06,
    "geometry": "128x64", "numerics": "int8-fp8", "smooth_k": true, "sink": false, "exact_fallback": "head",
    "groups": [{"name": "e", "entries": ["e"], "heads_q": 3, "heads": [
      {"head": 0, "is_sparse": true, "simthreshd1": 0.1, "cdfthreshd": 0.9, "pvthreshd": 5},
      {"head": 1, "is_sparse": true, "numerics": "none", "simthreshd1": 0.1, "cdfthreshd": 0.9, "pvthreshd": 5},
      {"head": 2, "is_sparse": false, "numerics": "int8-fp8", "simthreshd1": 1, "cdfthreshd": 1, "pvthreshd": 5}
    ]}]})";
  const ParamsFile f = parseParams(text, "p.json");
  ASSERT_TRUE(f.exactFallback.has_value());
  EXPECT_EQ(*f.exactFallback, ExactFallback::Head);
  EntryInfo info;
  info.name = "e";
  info.headsQ = 3;
  RunConfig c;
  applyParams(f, "p.json", info, c);
  EXPECT_EQ(c.numerics, Numerics::Int8Fp8);
  EXPECT_EQ(c.perHeadNumerics, (std::vector<Numerics>{Numerics::Int8Fp8, Numerics::None, Numerics::Int8Fp8}));
  // Written back, only the exception is spelt out.
  const ParamsFile again = parseParams(paramsToJson(f), "again.json");
  EXPECT_TRUE(again.groups[0].heads[1].exact);
  EXPECT_FALSE(again.groups[0].heads[2].exact);
  const std::string text2 = paramsToJson(f);
  size_t keys = 0;
  for (size_t p = text2.find("\"numerics\""); p != std::string::npos; p = text2.find("\"numerics\"", p + 1)) ++keys;
  EXPECT_EQ(keys, 2u) << "the file's numerics and head 1's exception, nothing else: " << text2;
}

}  // namespace
