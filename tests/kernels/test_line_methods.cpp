// MInference's and FlexPrefill's device Stage 1 (kernels/predictors/line_methods.h) called directly on random
// captures and on two layers of the bundled sample, against the CPU predictors (core::predictorFor): the
// selected / method-forced / dense-head bits, the block scores and the token pairs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_util.h"
#include "engine/device_stages.h"
#include "engine_fixture.h"
#include "predictors/line_common.h"
#include "predictors/line_methods.h"
#include "sparge/core/capture.h"
#include "sparge/core/half.h"
#include "sparge/core/predictor.h"
#include "sparge/core/quant.h"
#include "sparge/core/result.h"
#include "sparge/core/stage1.h"
#include "sparge/kernels/cuda_engine.h"

namespace sparge::cuda::predictors {
namespace {

using core::DType;
using core::Geometry;
using core::Method;

// One entry on the host: Q [B][Hq][Nq][D], K [B][Hkv][Nkv][D], values of `dtype`.
struct HostEntry {
  int B = 1, Hq = 4, Hkv = 2, Nq = 0, Nkv = 0, D = 64;
  DType dtype = DType::Float16;
  bool causal = false;
  core::Window window;
  double scale = 0;
  std::vector<float> q, k;
};

// Clustered keys with a few strong columns and a local bias, so that lines and blocks have a clear order
// away from ties.
HostEntry randomEntry(int B, int Hq, int Hkv, int Nq, int Nkv, int D, DType t, uint32_t seed) {
  HostEntry e;
  e.B = B;
  e.Hq = Hq;
  e.Hkv = Hkv;
  e.Nq = Nq;
  e.Nkv = Nkv;
  e.D = D;
  e.dtype = t;
  e.scale = 1.0 / std::sqrt(double(D));
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0.f, 1.f);
  e.q.resize(size_t(B) * Hq * Nq * D);
  e.k.resize(size_t(B) * Hkv * Nkv * D);
  std::vector<float> dir(static_cast<size_t>(D));
  for (float& v : dir) v = n01(rng);
  for (size_t r = 0; r < e.q.size() / D; ++r)
    for (int d = 0; d < D; ++d)
      e.q[r * D + d] = core::roundToInput(0.8f * n01(rng) + 0.6f * dir[size_t(d)], t);
  for (size_t r = 0; r < e.k.size() / D; ++r) {
    const bool strong = (rng() % 97) == 0;
    const float slow = std::sin(float(r % size_t(Nkv)) * 0.01f);
    for (int d = 0; d < D; ++d)
      e.k[r * D + d] = core::roundToInput(n01(rng) + (strong ? 2.5f : 0.3f * slow) * dir[size_t(d)], t);
  }
  return e;
}

uint16_t bitsOf(float x, DType t) {
  return t == DType::BFloat16 ? core::floatToBf16(x) : core::floatToHalf(x);
}

// The device side of one call: inputs, head list, block flags and outputs.
struct DeviceCall {
  DeviceBuffer q, k, heads, flags, selected, forced, score, dense, pairs, scratch;
  MethodLaunch launch;
  MethodRows rows;
  size_t blocks = 0, bh = 0;

  void upload(DeviceBuffer& dst, const std::vector<float>& src, DType t) {
    std::vector<uint16_t> bits(src.size());
    for (size_t i = 0; i < src.size(); ++i) bits[i] = bitsOf(src[i], t);
    dst.reserve(bits.size() * 2, "test input");
    check(cudaMemcpy(dst.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice), "upload");
  }

  DeviceCall(const HostEntry& e, const Geometry& g, const std::vector<int>& headList,
             const core::BlockValidity& validity, const std::vector<core::HeadParams>& params) {
    upload(q, e.q, e.dtype);
    upload(k, e.k, e.dtype);
    uploadHeads(heads, headList);
    Problem p = makeProblem(e.B, e.Hq, e.Hkv, e.Nq, e.Nkv, e.D, g, e.causal, e.window);
    p.heads = heads.as<int>();
    p.nHeads = int(headList.size());
    const std::vector<uint8_t> f = blockFlags(validity, g, e.Nq, e.Nkv, e.causal, e.window);
    flags.reserve(f.size(), "flags");
    check(cudaMemcpy(flags.get(), f.data(), f.size(), cudaMemcpyHostToDevice), "flags");
    bh = size_t(e.B) * e.Hq;
    blocks = bh * p.nq * p.nk;
    selected.reserve(blocks, "selected");
    forced.reserve(blocks, "forced");
    score.reserve(blocks * 4, "score");
    dense.reserve(bh, "dense");
    pairs.reserve(bh * 8, "pairs");
    launch.qkv =
        DeviceQkv{e.dtype == DType::BFloat16 ? ElemType::BF16 : ElemType::F16, q.get(), k.get(), nullptr};
    launch.problem = p;
    launch.scale = e.scale;
    launch.blockFlags = flags.as<uint8_t>();
    launch.params = &params;
    rows = MethodRows{selected.as<uint8_t>(), forced.as<uint8_t>(), score.as<float>(), dense.as<uint8_t>(),
                      pairs.as<double>()};
  }
};

struct Comparison {
  size_t blocks = 0, bitDiffs = 0, scoreDiffs = 0, pairDiffs = 0;
};

// Runs `m` on the device for `headList` and compares every listed head with the CPU predictor.
Comparison compareWithCpu(Method m, const HostEntry& e, const Geometry& g, const std::vector<int>& headList,
                          const std::vector<core::HeadParams>& params) {
  const core::BlockValidity validity = core::computeBlockValidity(g, e.Nq, e.Nkv, e.causal, e.window);
  DeviceCall call(e, g, headList, validity, params);
  (m == Method::MInference ? predictMInference : predictFlexPrefill)(call.launch, call.rows, call.scratch);
  check(cudaDeviceSynchronize(), "line predictor");
  std::vector<uint8_t> sel, forced, dense;
  std::vector<float> score;
  std::vector<double> pairs;
  download(sel, call.selected, call.blocks, "selected");
  download(forced, call.forced, call.blocks, "forced");
  download(score, call.score, call.blocks, "score");
  download(dense, call.dense, call.bh, "dense");
  download(pairs, call.pairs, call.bh, "pairs");
  const int nq = validity.nq, nk = validity.nk;
  Comparison c;
  int printed = 0;
  for (int b = 0; b < e.B; ++b)
    for (int hq : headList) {
      const int hk = hq / (e.Hq / e.Hkv);
      core::PredictInput in;
      in.q = e.q.data() + (size_t(b) * e.Hq + hq) * e.Nq * e.D;
      in.k = e.k.data() + (size_t(b) * e.Hkv + hk) * e.Nkv * e.D;
      in.nQ = e.Nq;
      in.nKv = e.Nkv;
      in.d = e.D;
      in.dtype = e.dtype;
      in.geometry = g;
      in.causal = e.causal;
      in.window = e.window;
      in.scale = e.scale;
      in.validity = &validity;
      const core::Stage1Mask cpu =
          core::predictorFor(m).predict(in, params[size_t(hq)], core::ForcedBlocks{});
      const size_t bhq = size_t(b) * e.Hq + hq, base = bhq * nq * nk;
      for (size_t x = 0; x < size_t(nq) * nk; ++x) {
        const uint8_t r = cpu.reasons[x];
        const bool same = bool(r & core::kReasonSelected) == bool(sel[base + x]) &&
                          bool(r & core::kReasonMethod) == bool(forced[base + x]) &&
                          bool(r & core::kReasonDenseHead) == bool(dense[bhq]);
        const float want = cpu.pooledProb[x], got = score[base + x];
        const bool scoreOk = std::fabs(got - want) <= 1e-5f + 2e-3f * std::fabs(want);
        c.bitDiffs += !same;
        c.scoreDiffs += !scoreOk;
        if ((!same || !scoreOk) && printed++ < 20)
          std::printf(
              "  b %d head %d block (%zu, %zu): cpu sel %d forced %d score %.7g | gpu sel %d forced %d score "
              "%.7g\n",
              b, hq, x / nk, x % nk, bool(r & core::kReasonSelected), bool(r & core::kReasonMethod), want,
              sel[base + x], forced[base + x], got);
      }
      c.blocks += size_t(nq) * nk;
      const double wantPairs = cpu.elementPairs, gotPairs = pairs[bhq];
      const bool pairsOk = std::isnan(wantPairs)
                               ? std::isnan(gotPairs)
                               : std::fabs(gotPairs - wantPairs) <= 1e-6 * std::max(1.0, wantPairs);
      if (!pairsOk) std::printf("  b %d head %d pairs: cpu %.17g gpu %.17g\n", b, hq, wantPairs, gotPairs);
      c.pairDiffs += !pairsOk;
    }
  std::printf("%s: %zu blocks, %zu with other bits, %zu with other scores, %zu heads with other pairs\n",
              core::methodLabel(m), c.blocks, c.bitDiffs, c.scoreDiffs, c.pairDiffs);
  return c;
}

void expectClose(const Comparison& c) {
  EXPECT_GT(c.blocks, 0u);
  EXPECT_LE(double(c.bitDiffs), 0.001 * double(c.blocks));
  EXPECT_LE(double(c.scoreDiffs), 0.001 * double(c.blocks));
  EXPECT_EQ(c.pairDiffs, 0u);
}

// Per-head MInference parameters mixing both patterns and line counts small enough to leave tiles off.
std::vector<core::HeadParams> minferenceParams(int Hq) {
  std::vector<core::HeadParams> out(static_cast<size_t>(Hq));
  for (int h = 0; h < Hq; ++h) {
    core::MInferenceParams& mp = out[size_t(h)].minference;
    mp.pattern = h % 3 == 2 ? core::MInferencePattern::BlockSparse : core::MInferencePattern::VerticalSlash;
    mp.verticalSize = 40 + 37 * h;
    mp.slashSize = 60 + 45 * h;
    mp.topk = 2 + h;
    out[size_t(h)].dense = h == 1;
  }
  return out;
}

// Per-head FlexPrefill parameters: both kinds of head (τ 0 never query-aware, τ 10 always), budgets.
std::vector<core::HeadParams> flexParams(int Hq) {
  std::vector<core::HeadParams> out(static_cast<size_t>(Hq));
  for (int h = 0; h < Hq; ++h) {
    core::FlexPrefillParams& fp = out[size_t(h)].flexprefill;
    fp.gamma = 0.5 + 0.1 * (h % 5);
    fp.tau = h % 2 ? 10.0 : (h % 4 == 2 ? 0.1 : 0.0);
    fp.minBudget = h == 3 ? 300 : 0;
    fp.maxBudget = h == 2 ? 700 : 0;
    out[size_t(h)].dense = h == 1;
  }
  return out;
}

struct Case {
  const char* name;
  int B, Hq, Hkv, Nq, Nkv, D;
  DType dtype;
  bool causal;
  core::Window window;
  Geometry g;
  std::vector<int> heads;
};

std::vector<Case> randomCases() {
  return {
      {"causal 64x128 fp16 D256, keys past the last full chunk",
       1,
       2,
       1,
       1100,
       1100,
       256,
       DType::Float16,
       true,
       {},
       core::kGeometry64x128,
       {0, 1}},
      {"causal 128x64 fp16 GQA",
       1,
       4,
       2,
       1500,
       1500,
       64,
       DType::Float16,
       true,
       {},
       core::kGeometry128x64,
       {0, 1, 2, 3}},
      {"causal 64x128 bf16 D128",
       2,
       4,
       1,
       1300,
       1300,
       128,
       DType::BFloat16,
       true,
       {},
       core::kGeometry64x128,
       {0, 2, 3}},
      {"bidirectional 128x64 bf16",
       1,
       6,
       3,
       1000,
       1333,
       64,
       DType::BFloat16,
       false,
       {},
       core::kGeometry128x64,
       {0, 1, 2, 3, 4, 5}},
      {"window 64x128 fp16",
       1,
       4,
       4,
       1700,
       1700,
       64,
       DType::Float16,
       false,
       {400, 150},
       core::kGeometry64x128,
       {1, 2, 3}},
      {"causal window 128x64 fp16",
       1,
       4,
       2,
       1400,
       1400,
       128,
       DType::Float16,
       true,
       {300, -1},
       core::kGeometry128x64,
       {0, 1, 2, 3}},
  };
}

HostEntry entryOf(const Case& c, uint32_t seed) {
  HostEntry e = randomEntry(c.B, c.Hq, c.Hkv, c.Nq, c.Nkv, c.D, c.dtype, seed);
  e.causal = c.causal;
  e.window = c.window;
  e.scale *= 1.3;  // a scale other than D^-1/2
  return e;
}

TEST(LineMethods, MInferenceMatchesCpuOnRandomCaptures) {
  REQUIRE_GPU();
  uint32_t seed = 11;
  for (const Case& c : randomCases()) {
    SCOPED_TRACE(c.name);
    std::printf("%s\n", c.name);
    expectClose(compareWithCpu(Method::MInference, entryOf(c, seed++), c.g, c.heads, minferenceParams(c.Hq)));
  }
}

TEST(LineMethods, FlexPrefillMatchesCpuOnRandomCaptures) {
  REQUIRE_GPU();
  uint32_t seed = 23;
  for (const Case& c : randomCases()) {
    SCOPED_TRACE(c.name);
    std::printf("%s\n", c.name);
    expectClose(compareWithCpu(Method::FlexPrefill, entryOf(c, seed++), c.g, c.heads, flexParams(c.Hq)));
  }
}

// Short sequences: FlexPrefill runs them dense (every tile method-forced), MInference still draws lines.
TEST(LineMethods, ShortSequences) {
  REQUIRE_GPU();
  HostEntry e = randomEntry(1, 2, 1, 200, 200, 64, DType::Float16, 5);
  e.causal = true;
  expectClose(compareWithCpu(Method::FlexPrefill, e, core::kGeometry128x64, {0, 1}, flexParams(2)));
  expectClose(compareWithCpu(Method::MInference, e, core::kGeometry64x128, {0, 1}, minferenceParams(2)));
}

std::string samplePath() {
  if (const char* env = std::getenv("SPARGE_SAMPLE_CAPTURE")) return env;
  return SPARGE_SAMPLE_CAPTURE_DEFAULT;
}

HostEntry sampleEntry(const core::CaptureReader& reader, const core::EntryInfo& info) {
  HostEntry e;
  e.B = int(info.batch);
  e.Hq = int(info.headsQ);
  e.Hkv = int(info.headsKV);
  e.Nq = int(info.tokensQ);
  e.Nkv = int(info.tokensKV);
  e.D = int(info.headDim);
  e.dtype = info.dtype == DType::BFloat16 ? DType::BFloat16 : DType::Float16;
  e.causal = info.causal;
  e.window = info.window;
  e.scale = info.scale;
  auto read = [&](core::Tensor t, int heads, int n, std::vector<float>& dst) {
    dst.resize(size_t(e.B) * heads * n * e.D);
    for (int b = 0; b < e.B; ++b)
      for (int h = 0; h < heads; ++h)
        reader.readHeadInto(info.name, t, b, h, dst.data() + (size_t(b) * heads + h) * n * e.D);
    for (float& v : dst) v = core::roundToInput(v, e.dtype);  // float32 captures are predicted in float16
  };
  read(core::Tensor::Q, e.Hq, e.Nq, e.q);
  read(core::Tensor::K, e.Hkv, e.Nkv, e.k);
  return e;
}

TEST(LineMethods, BothMatchCpuOnTwoSampleLayers) {
  REQUIRE_GPU();
  const std::string path = samplePath();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no sample capture at " << path;
  const core::CaptureReader reader(path);
  const std::vector<core::EntryInfo>& entries = reader.entries();
  ASSERT_GE(entries.size(), 2u);
  for (size_t at : {size_t(0), entries.size() - 1}) {
    const HostEntry e = sampleEntry(reader, entries[at]);
    std::vector<int> heads(size_t(e.Hq));
    for (int h = 0; h < e.Hq; ++h) heads[size_t(h)] = h;
    for (const Geometry& g : {core::kGeometry128x64, core::kGeometry64x128}) {
      SCOPED_TRACE(entries[at].name + (g.blockQ == 128 ? " 128x64" : " 64x128"));
      std::printf("%s %dx%d\n", entries[at].name.c_str(), g.blockQ, g.blockK);
      std::vector<core::HeadParams> defaults(size_t(e.Hq));
      expectClose(compareWithCpu(Method::MInference, e, g, heads, defaults));
      expectClose(compareWithCpu(Method::FlexPrefill, e, g, heads, defaults));
      expectClose(compareWithCpu(Method::MInference, e, g, heads, minferenceParams(e.Hq)));
      expectClose(compareWithCpu(Method::FlexPrefill, e, g, heads, flexParams(e.Hq)));
    }
  }
}

// Query-aware heads whose pooled scores are all equal (constant Q and K): γ cuts through the ties, which go
// to the lower block index first as in core's ranking, and the count of scores covering γ must be the CPU's
// exact sums' (sparge/core/cover_sum.h).
TEST(LineMethods, FlexPrefillPooledTiesCutAtGamma) {
  REQUIRE_GPU();
  for (const bool causal : {false, true}) {
    HostEntry e = randomEntry(1, 3, 1, 1200, 1200, 64, DType::Float16, 4);
    std::fill(e.q.begin(), e.q.end(), 0.25f);
    std::fill(e.k.begin(), e.k.end(), 0.5f);
    e.causal = causal;
    std::vector<core::HeadParams> params(3);
    for (int h = 0; h < 3; ++h) {
      params[size_t(h)].flexprefill.tau = 10.0;  // always query-aware
      params[size_t(h)].flexprefill.gamma = 0.35 + 0.19 * h;
    }
    const Comparison c = compareWithCpu(Method::FlexPrefill, e, core::kGeometry128x64, {0, 1, 2}, params);
    EXPECT_GT(c.blocks, 0u);
    EXPECT_EQ(c.bitDiffs, 0u) << (causal ? "causal" : "bidirectional");
    EXPECT_EQ(c.scoreDiffs, 0u);
  }
}

// Only the listed heads are written: the others keep what was there.
TEST(LineMethods, UnlistedHeadsUntouched) {
  REQUIRE_GPU();
  HostEntry e = randomEntry(1, 4, 2, 700, 700, 64, DType::Float16, 9);
  const core::BlockValidity validity =
      core::computeBlockValidity(core::kGeometry128x64, e.Nq, e.Nkv, false, {});
  const std::vector<core::HeadParams> params = flexParams(4);
  DeviceCall call(e, core::kGeometry128x64, {1, 3}, validity, params);
  for (auto fn : {predictMInference, predictFlexPrefill}) {
    check(cudaMemset(call.selected.get(), 0xAB, call.blocks), "memset");
    fn(call.launch, call.rows, call.scratch);
    std::vector<uint8_t> sel;
    download(sel, call.selected, call.blocks, "selected");
    const size_t perHead = call.blocks / 4;
    for (int h : {0, 2})
      for (size_t x = 0; x < perHead; ++x) ASSERT_EQ(sel[size_t(h) * perHead + x], 0xAB) << "head " << h;
    for (size_t x = 0; x < perHead; ++x) ASSERT_LE(sel[perHead + x], 1);
  }
}

// The device sorts' keys order scores as core's rankDescending does: larger first, NaN last, −0 equal to +0,
// equal keys by index (the oracle's comparator is core's). Runs without a GPU.
TEST(LineMethods, SortKeysOrderAsTheCpuRanking) {
  std::vector<float> v = {0.5f, -0.f, 0.f, NAN,  INFINITY, -INFINITY, 0.5f,   1e-30f,  -1e-30f, 3.f,
                          -2.f, NAN,  0.f, -0.f, 1e38f,    -1e38f,    1e-45f, -1e-45f, 2.f,     -INFINITY};
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> pick(-40, 40);
  for (int i = 0; i < 2000; ++i) v.push_back(float(pick(rng)) / 8.f);  // many ties
  std::vector<int> want(v.size()), got(v.size());
  std::iota(want.begin(), want.end(), 0);
  std::iota(got.begin(), got.end(), 0);
  std::stable_sort(want.begin(), want.end(), [&](int a, int b) {
    if (std::isnan(v[size_t(b)])) return !std::isnan(v[size_t(a)]);
    return !std::isnan(v[size_t(a)]) && v[size_t(a)] > v[size_t(b)];
  });
  std::stable_sort(got.begin(), got.end(), [&](int a, int b) {
    return lines::descendingKey(v[size_t(a)]) < lines::descendingKey(v[size_t(b)]);
  });
  EXPECT_EQ(got, want);
}

// The device sorts (a CTA per segment for short segments, one device-wide radix sort for long ones) give
// each segment's indices and values in the order of a stable host sort by core's ranking (larger first, NaN
// last, −0 equal to +0, ties by index); a keys-only sort the same values.
TEST(LineMethods, SortDescendingMatchesStableHostSort) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> pick(-60, 60);
  for (const bool keysOnly : {false, true})
    // Each sort path and its edges: a CTA's sort of (key, index) up to 4,096 values, keys alone up to 32,768
    // by a CTA a segment, the device-wide sort beyond.
    for (const auto& [nSeg, len] : {std::pair{37, 300}, std::pair{5, 4096}, std::pair{3, 5000},
                                    std::pair{2, 32768}, std::pair{2, 32769}}) {
      std::vector<float> v(size_t(nSeg) * len);
      for (float& x : v) x = float(pick(rng)) / 8.f;  // many ties
      v[3] = NAN;
      v[7] = -0.f;
      v[11] = INFINITY;
      v[size_t(len) + 2] = -INFINITY;
      DeviceBuffer scratch, keys, sorted, idx;
      lines::SegmentSort sort;
      lines::carveScratch(scratch, "sort scratch",
                          [&](lines::Carve& c) { lines::layoutSort(c, sort, nSeg, len, keysOnly); });
      keys.reserve(v.size() * sizeof(float), "keys");
      sorted.reserve(v.size() * sizeof(float), "sorted");
      idx.reserve(v.size() * sizeof(int), "idx");
      check(cudaMemcpy(keys.get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), "keys");
      lines::sortDescending(sort, keys.as<float>(), sorted.as<float>(), keysOnly ? nullptr : idx.as<int>(),
                            nullptr);
      std::vector<float> gotV(v.size());
      std::vector<int> gotI(v.size());
      check(cudaMemcpy(gotV.data(), sorted.get(), v.size() * sizeof(float), cudaMemcpyDeviceToHost),
            "sorted");
      check(cudaMemcpy(gotI.data(), idx.get(), v.size() * sizeof(int), cudaMemcpyDeviceToHost), "idx");
      for (int sg = 0; sg < nSeg; ++sg) {
        const float* seg = v.data() + size_t(sg) * len;
        std::vector<int> want(size_t(len), 0);
        std::iota(want.begin(), want.end(), 0);
        std::stable_sort(want.begin(), want.end(), [&](int a, int b) {
          if (std::isnan(seg[b])) return !std::isnan(seg[a]);
          return !std::isnan(seg[a]) && seg[a] > seg[b];
        });
        for (int r = 0; r < len; ++r) {
          const size_t at = size_t(sg) * len + size_t(r);
          if (!keysOnly) {
            ASSERT_EQ(gotI[at], want[size_t(r)])
                << "segment " << sg << " of " << nSeg << " x " << len << ", rank " << r;
          }
          const float w = seg[want[size_t(r)]];
          ASSERT_TRUE(std::isnan(w) ? std::isnan(gotV[at]) : gotV[at] == w)
              << "rank " << r << " keys only " << keysOnly;
        }
      }
    }
}

// Largest first, NaN last: the order γ counts take their values in.
bool nanLastDescending(float x, float y) {
  return !std::isnan(x) && (std::isnan(y) || x > y);
}

// What a γ count must give, computed here on the host from the rule alone (docs/methods.md): sort largest
// first (NaN last), weigh each value as floor(v · 2^k) (2^40 from 2^40 on, and for +inf and NaN), and count
// the leading values whose exact sum stays <= floor(threshold · 2^k) (at most 2^40 - 1), k = 39 less the
// bits of mul.
int expectedCover(const float* row, int len, double threshold, double mul) {
  int bits = 0;
  while (bits < 39 && std::ldexp(1.0, bits) < mul) ++bits;
  const int k = 39 - bits;
  const long double cap = std::ldexp(1.0L, 40);
  const long double limit = std::min(cap - 1, std::floor(std::ldexp((long double)(threshold * mul), k)));
  std::vector<int> order(static_cast<size_t>(len));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return nanLastDescending(row[a], row[b]); });
  int count = 0;
  long double sum = 0;  // exact: integers below 2^64
  for (int x : order) {
    const float v = row[x];
    sum += std::isnan(v) ? cap : v > 0.f ? std::min(cap, std::floor(std::ldexp((long double)v, k))) : 0;
    if (!(limit >= 0) || sum > limit) break;
    ++count;
  }
  return count;
}

// The device's γ counts against expectedCover, both ways: a block-wide prefix sum over the sorted rows, and
// the select over the same rows shuffled (no sort), with where it cuts the pooled-like rows. Two row
// families in one launch (line-like rows of 7,000
// values with mul 1, pooled-like rows of 5,000 with mul 300, longer than one chunk of the count kernel), with
// thresholds that land exactly on a prefix sum (the value after it must not fit), cut through a run of tied
// values, take every value, take none, are negative, and meet a NaN, an infinity and trailing zeros.
TEST(LineMethods, CoverCountsMatchExactSums) {
  REQUIRE_GPU();
  constexpr int kSlots = 8, kLenA = 7000, kLenB = 5000;
  std::mt19937 rng(9);
  std::exponential_distribution<float> expo(1.f);
  std::uniform_int_distribution<int> pick(1, 6);
  std::vector<float> a(size_t(kSlots) * kLenA), b(size_t(kSlots) * kLenB);
  for (float& v : a) v = expo(rng) / float(kLenA);
  // Pooled-like rows sum to about mul, as nbq softmax rows do; slots 2 and 3 hold many ties.
  const float tie = 300.f / (3.5f * kLenB);
  for (int s = 0; s < kSlots; ++s)
    for (int i = 0; i < kLenB; ++i)
      b[size_t(s) * kLenB + i] = s == 2 || s == 3 ? float(pick(rng)) * tie : expo(rng) * 300.f / float(kLenB);
  a[size_t(5) * kLenA + 1234] = NAN;
  a[size_t(6) * kLenA + 17] = INFINITY;
  std::fill(a.begin() + size_t(7) * kLenA + 5000, a.begin() + size_t(8) * kLenA, 0.f);
  for (int s = 0; s < kSlots; ++s) {
    std::sort(a.begin() + size_t(s) * kLenA, a.begin() + size_t(s + 1) * kLenA, nanLastDescending);
    std::sort(b.begin() + size_t(s) * kLenB, b.begin() + size_t(s + 1) * kLenB, nanLastDescending);
  }
  // A threshold whose weights equal the sum of the `n` largest values of a sorted row (mul 1: k = 39).
  const auto prefixThreshold = [&](const float* row, int n) {
    long double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::floor(std::ldexp((long double)row[i], 39));
    return double(std::ldexp(sum, -39));
  };
  const std::vector<double> thresholds = {prefixThreshold(a.data(), 100),
                                          prefixThreshold(a.data() + kLenA, 4097),
                                          0.37,
                                          0.61,
                                          -0.25,
                                          1e30,
                                          1e30,
                                          2.0};
  DeviceBuffer rowsA, rowsB, countA, countB, thr, heads;
  rowsA.reserve(a.size() * sizeof(float), "rows A");
  rowsB.reserve(b.size() * sizeof(float), "rows B");
  countA.reserve(kSlots * sizeof(int), "counts A");
  countB.reserve(kSlots * sizeof(int), "counts B");
  thr.reserve(thresholds.size() * sizeof(double), "thresholds");
  check(cudaMemcpy(rowsA.get(), a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice), "rows A");
  check(cudaMemcpy(rowsB.get(), b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice), "rows B");
  check(cudaMemcpy(thr.get(), thresholds.data(), thresholds.size() * sizeof(double), cudaMemcpyHostToDevice),
        "thresholds");
  std::vector<int> headList(static_cast<size_t>(kSlots));
  std::iota(headList.begin(), headList.end(), 0);
  uploadHeads(heads, headList);
  MethodLaunch m;
  m.problem = makeProblem(1, kSlots, kSlots, 64, 64, 64, core::kGeometry64x128, false, {});
  m.problem.heads = heads.as<int>();
  m.problem.nHeads = kSlots;
  lines::CoverRows cover{};
  cover.row[0] = lines::CoverRow{rowsA.as<float>(), kLenA, 1.0, countA.as<int>()};
  cover.row[1] = lines::CoverRow{rowsB.as<float>(), kLenB, 300.0, countB.as<int>()};
  cover.n = 2;
  lines::launchCoverCounts(m, cover, thr.as<double>());
  std::vector<int> gotA(kSlots), gotB(kSlots), wantA(kSlots), wantB(kSlots);
  check(cudaMemcpy(gotA.data(), countA.get(), kSlots * sizeof(int), cudaMemcpyDeviceToHost), "counts A");
  check(cudaMemcpy(gotB.data(), countB.get(), kSlots * sizeof(int), cudaMemcpyDeviceToHost), "counts B");
  for (int s = 0; s < kSlots; ++s) {
    wantA[size_t(s)] = expectedCover(a.data() + size_t(s) * kLenA, kLenA, thresholds[size_t(s)], 1.0);
    wantB[size_t(s)] = expectedCover(b.data() + size_t(s) * kLenB, kLenB, thresholds[size_t(s)], 300.0);
  }
  // The cases the rows are for: an exact prefix, all, none (negative), a NaN reached last, an infinity first.
  EXPECT_EQ(wantA[0], 100);
  EXPECT_EQ(wantA[1], 4097);
  EXPECT_EQ(wantA[4], 0);
  EXPECT_EQ(wantA[5], kLenA - 1);
  EXPECT_EQ(wantA[6], 0);
  EXPECT_EQ(wantA[7], kLenA);
  EXPECT_GT(wantB[2], 0);  // cuts through ties
  EXPECT_LT(wantB[2], kLenB);
  EXPECT_EQ(gotA, wantA);
  EXPECT_EQ(gotB, wantB);
  // The select, on the rows shuffled: first rows A and B alone (their keys held in registers), then beside
  // rows C of 40,000 values, longer than that form takes, so that all three run the form that reads its rows
  // at each pass. Its counts must be the same, and so must where the pooled-like counts cut their rows.
  constexpr int kLenC = 40000;
  std::vector<float> c(size_t(kSlots) * kLenC);
  for (int s = 0; s < kSlots; ++s)
    for (int i = 0; i < kLenC; ++i)
      c[size_t(s) * kLenC + i] =
          s % 2 ? expo(rng) * 300.f / float(kLenC) : float(pick(rng)) * 300.f / (3.5f * kLenC);
  const auto cutOf = [](const float* first, int len, int n) -> lines::CoverCut {
    std::vector<float> row(first, first + len);
    std::sort(row.begin(), row.end(), nanLastDescending);
    if (n == 0) return {0, 0, true};
    const uint32_t kth = lines::descendingKey(row[size_t(n - 1)]);
    int lo = n - 1, up = n;
    while (lo > 0 && lines::descendingKey(row[size_t(lo - 1)]) == kth) --lo;
    while (up < len && lines::descendingKey(row[size_t(up)]) == kth) ++up;
    return {kth, n - lo, n == up};
  };
  std::vector<int> wantC(kSlots);
  std::vector<lines::CoverCut> wantCutB(kSlots), wantCutC(kSlots);
  for (int s = 0; s < kSlots; ++s) {
    wantC[size_t(s)] = expectedCover(c.data() + size_t(s) * kLenC, kLenC, thresholds[size_t(s)], 300.0);
    wantCutB[size_t(s)] = cutOf(b.data() + size_t(s) * kLenB, kLenB, wantB[size_t(s)]);
    wantCutC[size_t(s)] = cutOf(c.data() + size_t(s) * kLenC, kLenC, wantC[size_t(s)]);
    std::shuffle(a.begin() + size_t(s) * kLenA, a.begin() + size_t(s + 1) * kLenA, rng);
    std::shuffle(b.begin() + size_t(s) * kLenB, b.begin() + size_t(s + 1) * kLenB, rng);
  }
  EXPECT_FALSE(wantCutB[2].all);  // slot 2's count ends inside a run of ties
  ASSERT_TRUE(lines::coverSelectFits(kLenA));
  ASSERT_TRUE(lines::coverSelectFits(kLenC));
  DeviceBuffer rowsC, countC, cutB, cutC;
  rowsC.reserve(c.size() * sizeof(float), "rows C");
  countC.reserve(kSlots * sizeof(int), "counts C");
  cutB.reserve(kSlots * sizeof(lines::CoverCut), "cuts B");
  cutC.reserve(kSlots * sizeof(lines::CoverCut), "cuts C");
  check(cudaMemcpy(rowsA.get(), a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice), "rows A");
  check(cudaMemcpy(rowsB.get(), b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice), "rows B");
  check(cudaMemcpy(rowsC.get(), c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice), "rows C");
  cover.row[1].cut = cutB.as<lines::CoverCut>();
  cover.row[2] =
      lines::CoverRow{rowsC.as<float>(), kLenC, 300.0, countC.as<int>(), cutC.as<lines::CoverCut>()};
  const auto fetch = [&](const DeviceBuffer& from, auto& to) {
    check(cudaMemcpy(to.data(), from.get(), to.size() * sizeof(to[0]), cudaMemcpyDeviceToHost), "select");
  };
  const auto expectCuts = [](const std::vector<lines::CoverCut>& got,
                             const std::vector<lines::CoverCut>& want, const char* what) {
    for (size_t s = 0; s < want.size(); ++s) {
      EXPECT_EQ(got[s].kth, want[s].kth) << what << " slot " << s;
      EXPECT_EQ(got[s].need, want[s].need) << what << " slot " << s;
      EXPECT_EQ(got[s].all, want[s].all) << what << " slot " << s;
    }
  };
  for (int rows : {2, 3}) {
    cover.n = rows;
    for (const DeviceBuffer* counts : {&countA, &countB, &countC})
      check(cudaMemset(counts->get(), 0xff, kSlots * sizeof(int)), "counts");
    lines::launchCoverSelect(m, cover, thr.as<double>());
    std::vector<int> gotC(kSlots);
    std::vector<lines::CoverCut> gotCutB(kSlots), gotCutC(kSlots);
    fetch(countA, gotA);
    fetch(countB, gotB);
    fetch(cutB, gotCutB);
    const char* form = rows == 2 ? "select, keys in registers" : "select, rows read at each pass";
    EXPECT_EQ(gotA, wantA) << form;
    EXPECT_EQ(gotB, wantB) << form;
    expectCuts(gotCutB, wantCutB, form);
    if (rows < 3) continue;
    fetch(countC, gotC);
    fetch(cutC, gotCutC);
    EXPECT_EQ(gotC, wantC) << form;
    expectCuts(gotCutC, wantCutC, form);
  }
}

}  // namespace
}  // namespace sparge::cuda::predictors
