// The CUDA engine's Stage 1 of every block predictor other than SpargeAttn's that has a device predictor,
// against the CPU engine's (each CPU predictor is itself checked against an independent numpy implementation
// of the rule in tests/methods): random captures (GQA, causal and not, windows, both geometries, fp16 and
// bf16, partial blocks, batch 2, the sink and the diagonal) and two layers of the bundled sample capture. At
// least 99.9 % of the blocks must be equal in mask and reasons (the rest are near-ties of fp32 sums taken in
// another order: each is printed with both engines' scores), and the token pairs within a relative 2e-3.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "engine_fixture.h"
#include "predictors/predictors.h"
#include "sparge/core/capture.h"
#include "sparge/core/cpu_engine.h"
#include "sparge/core/error.h"
#include "sparge/kernels/cuda_engine.h"

namespace sparge::cuda {
namespace {

using core::Method;

std::vector<Method> deviceMethods() {
  std::vector<Method> out;
  for (Method m : core::kAllMethods)
    if (m != Method::SpargeAttn && predictors::hasDevicePredictor(m)) out.push_back(m);
  return out;
}

// Each method's default parameters, then settings that reach other branches of its rule (XAttention: other
// strides, so that a key block spans 1 to 32 strided columns, then a threshold on the first stride's cached
// statistics; FlexPrefill: other γ, τ and budgets; MoBA: a top-k at the edge of the
// register path's lists, then one past them). `all` false
// leaves out the strides of 4 and 64 (the CPU's cost grows as the stride falls).
std::vector<core::HeadParams> settingsOf(Method m, bool all) {
  std::vector<core::HeadParams> out(1);
  if (m == Method::XAttention) {
    core::HeadParams p;
    p.xattention = {0.7, 16};
    out.push_back(p);
    if (all) {
      p.xattention = {0.8, 4};
      out.push_back(p);
      p.xattention = {0.9, 64};
      out.push_back(p);
    }
    p.xattention = {0.5, 8};
    out.push_back(p);
  } else if (m == Method::FlexPrefill) {
    // Every head on lines (τ 0), every head query-aware (τ 1: the square-root JS distance is at most √ln 2)
    // with a maximum budget, a minimum budget that makes the shorter sequences run dense.
    core::HeadParams p;
    p.flexprefill.gamma = 0.95;
    p.flexprefill.tau = 0;
    out.push_back(p);
    p.flexprefill.gamma = 0.7;
    p.flexprefill.tau = 1;
    p.flexprefill.maxBudget = 512;
    out.push_back(p);
    p.flexprefill.tau = 0.1;
    p.flexprefill.minBudget = 1024;
    out.push_back(p);
  } else if (m == Method::Moba) {
    core::HeadParams p;
    p.moba.topk = 9;
    out.push_back(p);
    p.moba.topk = 12;
    out.push_back(p);
  }
  return out;
}

struct Tally {
  int64_t blocks = 0, differing = 0, scoreFar = 0, printed = 0;
  double worstPairs = 0;
};

// The CPU and CUDA results of one run compared block for block; differences printed with both scores.
void compare(const core::EntryResult& cpu, const core::EntryResult& gpu, const std::string& label, Tally& t) {
  ASSERT_EQ(cpu.heads.size(), gpu.heads.size()) << label;
  for (size_t h = 0; h < cpu.heads.size(); ++h) {
    const core::HeadResult& c = cpu.heads[h];
    const core::HeadResult& g = gpu.heads[h];
    ASSERT_EQ(c.head, g.head) << label;
    ASSERT_EQ(c.batch, g.batch) << label;
    ASSERT_EQ(c.blockMask.size(), g.blockMask.size()) << label;
    ASSERT_EQ(c.pooledProb.size(), g.pooledProb.size()) << label;
    for (size_t x = 0; x < c.blockMask.size(); ++x) {
      ++t.blocks;
      if (c.blockMask[x] == g.blockMask[x] && c.reasons[x] == g.reasons[x]) continue;
      ++t.differing;
      if (t.printed++ < 20)
        std::cout << label << " head " << c.head << " block (" << x / size_t(c.nk) << ", " << x % size_t(c.nk)
                  << "): cpu mask " << int(c.blockMask[x]) << " reasons " << int(c.reasons[x]) << " score "
                  << c.pooledProb[x] << ", cuda mask " << int(g.blockMask[x]) << " reasons "
                  << int(g.reasons[x]) << " score " << g.pooledProb[x] << "\n";
    }
    for (size_t x = 0; x < c.pooledProb.size(); ++x)
      if (!(std::fabs(g.pooledProb[x] - c.pooledProb[x]) <= 1e-4 + 1e-3 * std::fabs(c.pooledProb[x]))) {
        ++t.scoreFar;
        if (t.printed++ < 20)
          std::cout << label << " head " << c.head << " block " << x << ": score cpu " << c.pooledProb[x]
                    << " cuda " << g.pooledProb[x] << "\n";
      }
    if (std::isnan(c.elementPairs)) {
      EXPECT_TRUE(std::isnan(g.elementPairs)) << label << " head " << c.head;
    } else {
      ASSERT_FALSE(std::isnan(g.elementPairs)) << label << " head " << c.head;
      const double rel = std::fabs(g.elementPairs - c.elementPairs) / std::max(1.0, c.elementPairs);
      t.worstPairs = std::max(t.worstPairs, rel);
      EXPECT_LE(rel, 2e-3) << label << " head " << c.head << " pairs cpu " << c.elementPairs << " cuda "
                           << g.elementPairs;
    }
  }
}

void expectAgreement(const Tally& t, const std::string& what) {
  std::cout << what << ": " << t.differing << " of " << t.blocks << " blocks differ in mask or reasons, "
            << t.scoreFar << " in score beyond 1e-4 + 1e-3 relative, worst relative pair error "
            << t.worstPairs << "\n";
  EXPECT_GT(t.blocks, 0);
  EXPECT_LE(double(t.differing), 1e-3 * double(t.blocks)) << what;
  EXPECT_LE(double(t.scoreFar), 1e-3 * double(t.blocks)) << what;
}

// Runs `m` under each of `settings` on both engines (one CUDA engine per entry, so cached statistics are
// reused).
void runBoth(Method m, const std::shared_ptr<core::EntryData>& e, core::RunConfig cfg,
             const std::string& label, Tally& t, const std::vector<core::HeadParams>& settings) {
  core::CpuEngine cpu(2);
  CudaEngine gpu;
  cpu.setEntry(e);
  gpu.setEntry(e);
  core::RunOptions opt;
  opt.computeError = false;
  cfg.method = m;
  for (const core::HeadParams& p : settings) {
    cfg.defaults = p;
    compare(cpu.run(cfg, opt), gpu.run(cfg, opt), label + " " + core::toString(m), t);
  }
  if (m == Method::Moba) {  // heads of the register path and of the score rows in one launch
    cfg.defaults = core::HeadParams{};
    cfg.perHead.assign(size_t(e->info.headsQ), core::HeadParams{});
    for (size_t h = 1; h < cfg.perHead.size(); h += 2) cfg.perHead[h].moba.topk = 12;
    compare(cpu.run(cfg, opt), gpu.run(cfg, opt), label + " MoBA, mixed top-k", t);
  }
}

struct RandomCase {
  fixture::Shape shape;
  core::Geometry geometry;
  core::Window window;
  bool sink = false, diagonal = false;
};

TEST(CudaMethods, RandomCapturesMatchCpuEngine) {
  REQUIRE_GPU();
  using core::DType;
  const std::vector<RandomCase> cases = {
      {{1, 4, 2, 1000, 1000, 64, DType::Float16, true}, core::kGeometry128x64, {}, false, false},
      {{1, 4, 2, 1000, 1000, 64, DType::BFloat16, false}, core::kGeometry64x128, {}, true, false},
      {{2, 2, 1, 700, 900, 128, DType::Float16, false}, core::kGeometry128x64, {200, 50}, false, true},
      {{1, 4, 4, 1100, 1100, 128, DType::BFloat16, true}, core::kGeometry64x128, {300, -1}, true, true},
      // Whole groups of every stride on both sides (XAttention's wgmma kernel on Hopper), partial tiles.
      {{2, 4, 2, 1024, 1536, 128, DType::Float16, false}, core::kGeometry64x128, {}, false, false},
      // Several row tiles of XAttention's score kernels whose seen column tiles start past the first (a
      // window): the list of seen tiles (visibleTiles in xattention.cu) must hold every tile a row sees.
      {{1, 2, 1, 4096, 4096, 64, DType::Float16, true}, core::kGeometry64x128, {1000, -1}, false, false},
      {{1, 2, 2, 3000, 4000, 128, DType::BFloat16, false}, core::kGeometry128x64, {700, 300}, false, false},
  };
  for (Method m : deviceMethods()) {
    Tally t;
    for (size_t k = 0; k < cases.size(); ++k) {
      const RandomCase& rc = cases[k];
      auto e = fixture::makeEntry(rc.shape, 11 + uint32_t(k));
      e->info.window = rc.window;
      core::RunConfig cfg = fixture::makeConfig(rc.geometry, true, core::HeadParams{}, rc.sink);
      cfg.diagonal = rc.diagonal;
      runBoth(m, e, cfg, "random case " + std::to_string(k), t, settingsOf(m, true));
    }
    expectAgreement(t, std::string("random captures, ") + core::toString(m));
  }
}

// MoBA's score rows over long key rows, at top-k 12 and 48: its bisection for the cut holds rows of up to 512
// blocks in registers (16 a lane past 256; the random captures' short rows take 8) and reads longer ones from
// shared memory at every step. Rows of 300 and 500 blocks of 64 keys (a partial last one in the second) and
// of 700; two query tiles whose tokens own a block.
TEST(CudaMethods, MobaLongRowsMatchCpuEngine) {
  REQUIRE_GPU();
  using core::DType;
  Tally t;
  const int keys[] = {300 * 64, 500 * 64 - 7, 700 * 64};
  for (int k = 0; k < 3; ++k) {
    auto e = fixture::makeEntry({1, 2, 1, 256, keys[k], 64, DType::Float16, false}, 41 + uint32_t(k));
    core::RunConfig cfg = fixture::makeConfig(core::kGeometry128x64, true, core::HeadParams{}, false);
    core::HeadParams p;
    p.moba.topk = 12;
    runBoth(Method::Moba, e, cfg, "long rows " + std::to_string(keys[k]), t, {p});
    p.moba.topk = 48;
    runBoth(Method::Moba, e, cfg, "long rows " + std::to_string(keys[k]), t, {p});
  }
  expectAgreement(t, "long key rows, moba");
}

std::string samplePath() {
  if (const char* env = std::getenv("SPARGE_SAMPLE_CAPTURE")) return env;
  return SPARGE_SAMPLE_CAPTURE;
}

TEST(CudaMethods, SampleCaptureMatchesCpuEngine) {
  REQUIRE_GPU();
  const std::string path = samplePath();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no sample capture at " << path;
  core::CaptureReader reader(path);
  for (Method m : deviceMethods()) {
    Tally t;
    for (const char* name : {"l05_s000", "l20_s000"}) {
      auto e = std::make_shared<core::EntryData>(core::loadEntry(reader, name));
      for (const core::Geometry& g : {core::kGeometry128x64, core::kGeometry64x128})
        runBoth(m, e, fixture::makeConfig(g, true, core::HeadParams{}), std::string(name) + " " + g.label(),
                t, settingsOf(m, false));
    }
    expectAgreement(t, std::string("sample capture, ") + core::toString(m));
  }
}

// XAttention at τ = 1 on queries scaled up until most block masses underflow to 0: the cumulative mass then
// reaches τ · total within rounding while blocks remain in the row, which the device selection's warp scan
// cannot decide (keptByScan in xattention.cu): those rows take the sequential loop, in the CPU's order.
TEST(CudaMethods, XAttentionRowsAtTheirThresholdMatchCpuEngine) {
  REQUIRE_GPU();
  Tally t;
  for (bool causal : {false, true}) {
    auto e = fixture::makeEntry({1, 2, 1, 1024, 1024, 128, core::DType::Float16, causal}, 5);
    for (float& x : e->q) x = fixture::roundTo(12.f * x, core::DType::Float16);
    core::HeadParams p;
    p.xattention = {1.0, 8};
    runBoth(Method::XAttention, e, fixture::makeConfig(core::kGeometry64x128, true, p),
            causal ? "tau 1, causal" : "tau 1", t, {p});
  }
  expectAgreement(t, "XAttention at tau 1");
  EXPECT_EQ(t.differing, 0);  // the loop is the CPU's, in its order: no near-tie excuses a difference here
}

// Every method of the CPU engine has a device predictor, so that no choice in the GUI or the CLI depends on
// the engine (host only: the table, no GPU needed).
TEST(CudaMethods, EveryMethodHasADevicePredictor) {
  for (Method m : core::kAllMethods) {
    if (m == Method::SpargeAttn) continue;  // Stage 1 of its own (kernels/stages/predict.cu)
    EXPECT_TRUE(predictors::hasDevicePredictor(m)) << core::toString(m);
  }
}

}  // namespace
}  // namespace sparge::cuda
