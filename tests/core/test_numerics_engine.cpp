// The CPU engine's numerics plumbing: local-window element masks against a naive softmax, non-finite scores
// flagged (never L1 0 / cos 1), the error split (deployed / sparse alone / quantization alone), results that
// do not depend on what was cached, and numerics recorded in and re-applied from parameter files.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "sparge/core/cpu_engine.h"
#include "sparge/core/params_io.h"
#include "sparge/core/stage1.h"
#include "sparge/core/synthetic.h"
#include "test_util.h"

using namespace sparge::core;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Softmax over the keys that `visibleKeys` allows and the mask selects, in double; rows with none are 0.
std::vector<double> naiveWindowed(const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, int64_t nQ, int64_t nKv, int64_t d,
                                  double scale, bool causal, const Window& w, const Geometry& g,
                                  const std::vector<uint8_t>& mask) {
  const int nk = int(ceilDiv(nKv, g.blockK));
  std::vector<double> out(size_t(nQ * d), 0.0);
  for (int64_t t = 0; t < nQ; ++t) {
    const KeyRange kr = visibleKeys(t, nKv, causal, w);
    std::vector<double> lg;
    std::vector<int64_t> keys;
    for (int64_t s = std::max<int64_t>(0, kr.first); s <= kr.last; ++s) {
      if (!mask[size_t(t / g.blockQ) * nk + s / g.blockK]) continue;
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += double(q[t * d + c]) * k[s * d + c];
      lg.push_back(dot * scale);
      keys.push_back(s);
    }
    if (keys.empty()) continue;
    const double mx = *std::max_element(lg.begin(), lg.end());
    double den = 0;
    for (double x : lg) den += std::exp(x - mx);
    for (size_t i = 0; i < keys.size(); ++i)
      for (int64_t c = 0; c < d; ++c) out[t * d + c] += std::exp(lg[i] - mx) / den * v[keys[i] * d + c];
  }
  return out;
}

std::shared_ptr<EntryData> synthEntry(int64_t hq, int64_t hkv, int64_t n, bool causal, DType dtype) {
  SynthSpec s;
  s.headsQ = hq;
  s.headsKV = hkv;
  s.tokensQ = n;
  s.tokensKV = n;
  s.headDim = 32;
  s.headDimV = 32;
  s.causal = causal;
  s.segment = 128;
  s.seed = 7;
  s.dtype = dtype;
  return std::make_shared<EntryData>(makeSyntheticEntry(s));
}

}  // namespace

// A local window makes the first visited blocks of a row partial too, not only the diagonal one.
TEST(NumericsEngine, WindowMasksEveryPartialBlock) {
  const int64_t nQ = 300, nKv = 420, d = 16;
  const auto q = sparge::test::normalValues(size_t(nQ * d), 1),
             k = sparge::test::normalValues(size_t(nKv * d), 2),
             v = sparge::test::normalValues(size_t(nKv * d), 3);
  for (const Geometry& g : {kGeometry128x64, kGeometry64x128})
    for (const auto& [causal, w] :
         {std::pair<bool, Window>{true, Window{100, -1}}, {false, Window{70, 45}}, {false, Window{-1, 10}}}) {
      const int nq = int(ceilDiv(nQ, g.blockQ)), nk = int(ceilDiv(nKv, g.blockK));
      std::vector<uint8_t> mask(size_t(nq) * nk, 1);
      mask[1] = 0;  // one unselected block as well
      HeadOperands h{.q = q.data(),
                     .k = k.data(),
                     .v = v.data(),
                     .nQ = nQ,
                     .nKv = nKv,
                     .d = d,
                     .dv = d,
                     .scale = 0.3,
                     .causal = causal,
                     .window = w,
                     .dtype = DType::Float32,
                     .keyMean = nullptr};
      const AttentionOutput o =
          stage2Passes(h, g, {PassSpec{Numerics::None, mask.data(), kInf, false}}).front();
      const std::vector<double> want = naiveWindowed(q, k, v, nQ, nKv, d, 0.3, causal, w, g, mask);
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(o.out[i] - want[i]));
      EXPECT_LT(worst, 2e-5) << g.label() << " causal " << causal << " window " << w.left << "," << w.right;
    }
}

// Scores that overflow float (an extreme softmax scale) flag the head; it must not look perfect.
TEST(NumericsEngine, NonFiniteScoresFlagTheHead) {
  for (Numerics n : {Numerics::None, Numerics::Int8Fp8}) {
    auto e = synthEntry(2, 2, 256, false, DType::Float16);
    e->info.scale = 1e300;
    CpuEngine eng(2);
    eng.setEntry(e);
    RunConfig cfg;
    cfg.numerics = n;
    const EntryResult r = eng.run(cfg, {});
    for (const HeadResult& h : r.heads) {
      EXPECT_TRUE(h.hasNonFinite) << toString(n);
      EXPECT_TRUE(std::isnan(h.error.l1()) && std::isnan(h.error.cosSim())) << toString(n);
    }
    EXPECT_FALSE(r.warnings.empty());
  }
}

// Inputs near the float limit overflow the scores as well (float32 captures are kept exact by `none`).
TEST(NumericsEngine, HugeInputsFlagTheHead) {
  auto e = synthEntry(2, 2, 256, false, DType::Float32);
  for (float& x : e->q) x = 3e38f;
  for (float& x : e->k) x = std::fabs(x) + 1.0f;  // every product positive: the sums overflow
  CpuEngine eng(2);
  eng.setEntry(e);
  RunConfig cfg;
  cfg.numerics = Numerics::None;
  const EntryResult r = eng.run(cfg, {});
  for (const HeadResult& h : r.heads) EXPECT_TRUE(h.hasNonFinite);
}

// With exact numerics the sparse-alone error is the deployed one and quantization costs nothing; with a
// quantized one, a dense head's deployed error is exactly its quantization error and the parts are all there.
TEST(NumericsEngine, ErrorsSplitByCause) {
  auto e = synthEntry(4, 2, 512, true, DType::Float16);
  CpuEngine eng(2);
  eng.setEntry(e);
  RunConfig cfg;
  cfg.defaults.tau = 0.8;
  cfg.defaults.lambda = 3.0;
  cfg.perHead.assign(4, cfg.defaults);
  cfg.perHead[1].dense = true;
  const EntryResult exact = eng.run(cfg, {});
  for (const HeadResult& h : exact.heads) {
    EXPECT_EQ(h.errorSparse.absDiff, h.error.absDiff);
    EXPECT_EQ(h.errorQuant.absDiff, 0.0);
  }
  double quantL1[2] = {0, 0};
  for (Numerics n : {Numerics::Int8Fp16, Numerics::Int8Fp8}) {
    cfg.numerics = n;
    const EntryResult q = eng.run(cfg, {});
    quantL1[n == Numerics::Int8Fp8 ? 1 : 0] = q.errorQuant.l1();
    for (size_t i = 0; i < q.heads.size(); ++i) {
      const HeadResult& h = q.heads[i];
      EXPECT_EQ(h.errorSparse.absDiff, exact.heads[i].error.absDiff) << "same mask and λ in exact numerics";
      EXPECT_GT(h.errorQuant.l1(), 1e-4) << toString(n);
      if (h.params.dense) {
        EXPECT_EQ(h.error.absDiff, h.errorQuant.absDiff);
      } else {
        EXPECT_GT(h.error.l1(), h.errorSparse.l1() * 0.5);
      }
    }
  }
  EXPECT_GT(quantL1[1], 1.5 * quantL1[0]) << "FP8 P and V cost more than fp16 ones";
}

// Whether the dense outputs were already cached must not change a single bit of the deployed run.
TEST(NumericsEngine, ResultsDoNotDependOnTheCache) {
  auto e = synthEntry(4, 4, 700, false, DType::BFloat16);
  RunConfig cfg;
  cfg.numerics = Numerics::Int8Fp8;
  cfg.geometry = kGeometry64x128;
  cfg.defaults.tau = 0.7;
  cfg.defaults.lambda = 2.0;
  CpuEngine warm(2), cold(2);
  warm.setEntry(e);
  cold.setEntry(e);
  RunConfig dense = cfg;
  dense.defaults.dense = true;
  warm.run(dense, {});  // fills the reference and the quantized dense cache
  const EntryResult a = warm.run(cfg, {}), b = cold.run(cfg, {});
  for (size_t i = 0; i < a.heads.size(); ++i) {
    EXPECT_EQ(a.heads[i].pvSkipped, b.heads[i].pvSkipped);
    EXPECT_EQ(a.heads[i].error.absDiff, b.heads[i].error.absDiff);
    EXPECT_EQ(a.heads[i].errorSparse.absDiff, b.heads[i].errorSparse.absDiff);
    EXPECT_EQ(a.heads[i].errorQuant.absDiff, b.heads[i].errorQuant.absDiff);
  }
  EXPECT_TRUE(a.times.referenceCached);
  EXPECT_TRUE(b.times.referenceInSparse);
}

// A parameter file records the numerics it was tuned in, and applying it restores them (with a warning).
TEST(NumericsEngine, ParamsFileCarriesTheNumerics) {
  ParamsFile f;
  f.numerics = Numerics::Int8Fp16;
  f.geometry = kGeometry128x64;
  f.l1 = 0.05;
  f.l2 = 0.06;
  ParamsGroup g;
  g.name = "e";
  g.entries = {"e"};
  g.headsQ = 1;
  ParamsHead h;
  h.l1 = 0.04;
  h.l1Sparse = 0.03;
  h.l1Quant = 0.02;
  g.heads.push_back(h);
  f.groups.push_back(g);
  const std::string text = paramsToJson(f);
  EXPECT_NE(text.find("\"numerics\": \"int8-fp16\""), std::string::npos);
  EXPECT_NE(text.find("\"target\": \"sm80\""), std::string::npos);
  const ParamsFile back = parseParams(text, "p.json");
  EXPECT_EQ(back.numerics, Numerics::Int8Fp16);
  EXPECT_DOUBLE_EQ(back.groups[0].heads[0].l1Quant, 0.02);
  EntryInfo info;
  info.name = "e";
  info.headsQ = 1;
  RunConfig cfg;
  cfg.numerics = Numerics::Int8Fp8;
  std::vector<std::string> warnings;
  applyParams(back, "p.json", info, cfg, &warnings);
  EXPECT_EQ(cfg.numerics, Numerics::Int8Fp16);
  EXPECT_FALSE(warnings.empty());
  // Files from before the numerics existed were tuned in exact numerics.
  std::string old = text;
  old.erase(old.find("\"numerics\""),
            old.find('\n', old.find("\"numerics\"")) - old.find("\"numerics\"") + 1);
  EXPECT_EQ(parseParams(old, "old.json").numerics, Numerics::None);
}
