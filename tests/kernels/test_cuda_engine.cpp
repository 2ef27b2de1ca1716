// The CUDA engine against the CPU reference engine: Stage-1 masks (with every difference explained by
// a near-tie), Stage-2 outputs and PV-skip maps for the same mask, error sums, edge shapes, errors.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attention/sm90/smem_layout_sm90.h"
#include "common/launch.h"  // the kernel launchers
#include "engine_fixture.h"
#include "scoped_env.h"
#include "sparge/core/cpu_engine.h"
#include "sparge/core/error.h"
#include "sparge/core/half.h"
#include "sparge/core/stage1.h"
#include "sparge/kernels/cuda_engine.h"

namespace sparge::cuda {
namespace {

using core::DType;
using core::EntryData;
using core::Geometry;
using fixture::makeConfig;
using fixture::makeEntry;
using fixture::roundTo;
using fixture::Shape;

// ---------------------------------------------------------------------------------------------
// Stage 1: masks

struct MaskTally {
  int64_t blocks = 0, differing = 0, unexplained = 0, probClose = 0, probTotal = 0;
  std::string firstUnexplained;
};

// Is the difference at (i, j) due to a near-tie? Either a similarity within rounding of θ, or the
// block's pooled probability within rounding of the row's selection boundary, or (CDF) a cumulative
// sum within rounding of τ at the boundary.
bool explained(const core::BlockStats& st, const core::Stage1Mask& cpu, const core::HeadResult& gpu,
               const core::HeadParams& p, int i, int j) {
  const int nk = st.nk;
  const float th = float(p.theta);
  auto nearTheta = [&](float s) { return std::isfinite(s) && std::fabs(s - th) <= 2e-4f; };
  if (nearTheta(st.selfSimQ[i]) || nearTheta(st.selfSimK[j]) || nearTheta(gpu.selfSimQ[i]) ||
      nearTheta(gpu.selfSimK[j]))
    return true;
  const float* prow = cpu.pooledProb.data() + (size_t)i * nk;
  if (std::isnan(prow[0])) return false;  // all-NaN rows select everything on both sides
  std::vector<int> order(nk);
  for (int x = 0; x < nk; ++x) order[x] = x;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prow[a] > prow[b]; });
  int keep = 0;
  for (int x = 0; x < nk; ++x) keep += (cpu.reasons[(size_t)i * nk + x] & core::kReasonSelected) ? 1 : 0;
  auto tol = [](float a, float b) { return 2.5e-3f * std::max(std::fabs(a), std::fabs(b)) + 1e-7f; };
  const float pj = prow[j], pg = gpu.pooledProb[(size_t)i * nk + j];
  for (int r : {keep - 1, keep}) {
    if (r < 0 || r >= nk) continue;
    float pb = prow[order[r]];
    if (std::fabs(pj - pb) <= tol(pj, pb) || std::fabs(pg - pb) <= tol(pg, pb)) return true;
  }
  if (p.mode == core::SelectMode::Cdf) {
    float cdf = 0;
    for (int r = 0; r < nk; ++r) {
      cdf += prow[order[r]];
      if (r >= keep - 2 && r <= keep + 1 && std::fabs(cdf - float(p.tau)) <= 4e-3f) return true;
    }
  }
  return false;
}

void compareMasks(const EntryData& e, const core::RunConfig& cfg, CudaEngine& gpu, MaskTally& tally) {
  core::RunOptions opt;
  opt.computeError = false;
  core::EntryResult gr = gpu.run(cfg, opt);
  const core::EntryInfo& in = e.info;
  ASSERT_EQ(gr.heads.size(), size_t(in.batch * in.headsQ));
  for (const core::HeadResult& hr : gr.heads) {
    const core::HeadParams& p = cfg.forHead(hr.head);
    core::BlockStats st = core::computeBlockStats(
        e.qHead(hr.batch, hr.head), in.tokensQ, e.kHead(hr.batch, in.kvHeadOf(hr.head)), in.tokensKV,
        in.headDim, in.dtype, cfg.geometry, cfg.smoothK, in.causal, in.window);
    core::Stage1Mask cm = core::selectBlocks(st, p, {cfg.sink, cfg.diagonal}, in.tokensQ, in.tokensKV);
    ASSERT_EQ(hr.nq, st.nq);
    ASSERT_EQ(hr.nk, st.nk);
    for (int i = 0; i < st.nq; ++i)
      for (int j = 0; j < st.nk; ++j) {
        size_t x = (size_t)i * st.nk + j;
        ++tally.blocks;
        // The causal rule and the window are exact on both sides.
        EXPECT_EQ((hr.reasons[x] & core::kReasonCausalOff) != 0,
                  !core::blockValid(i, j, cfg.geometry, in.tokensQ, in.tokensKV, in.causal, in.window));
        if (cfg.diagonal && !(hr.reasons[x] & core::kReasonCausalOff)) {
          EXPECT_EQ((hr.reasons[x] & core::kReasonDiagonal) != 0,
                    core::blockOnDiagonal(i, j, cfg.geometry, in.tokensQ, in.tokensKV, in.causal, in.window));
        }
        float a = hr.pooledProb[x], b = cm.pooledProb[x];
        ++tally.probTotal;
        if ((std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= 1e-3f * std::max(std::fabs(b), 1e-4f))
          ++tally.probClose;
        if (hr.blockMask[x] != cm.mask[x]) {
          ++tally.differing;
          if (!explained(st, cm, hr, p, i, j)) {
            if (tally.unexplained++ == 0)
              tally.firstUnexplained = "head " + std::to_string(hr.head) + " block (" + std::to_string(i) +
                                       "," + std::to_string(j) + ") gpu " + std::to_string(hr.blockMask[x]) +
                                       " cpu " + std::to_string(cm.mask[x]) + " p_gpu " + std::to_string(a) +
                                       " p_cpu " + std::to_string(b);
          }
        } else if (hr.reasons[x] != cm.reasons[x]) {
          // Same decision; reasons may differ only in the Selected bit of a near-tie.
          EXPECT_TRUE(((hr.reasons[x] ^ cm.reasons[x]) & ~core::kReasonSelected) == 0)
              << "reasons differ beyond Selected at head " << hr.head << " (" << i << "," << j << ")";
        }
      }
    for (int i = 0; i < st.nq; ++i) {
      float a = hr.selfSimQ[i], b = st.selfSimQ[i];
      EXPECT_TRUE((std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= 1e-4f)
          << "selfSimQ " << i << " " << a << " " << b;
    }
    for (int j = 0; j < st.nk; ++j) {
      float a = hr.selfSimK[j], b = st.selfSimK[j];
      EXPECT_TRUE((std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= 1e-4f)
          << "selfSimK " << j << " " << a << " " << b;
    }
  }
}

// The near-tie rule used above must be able to reject a difference (no GPU needed).
TEST(CudaStage1, NearTieRuleAcceptsTiesAndRejectsRealDifferences) {
  core::BlockStats st;
  st.nq = 1;
  st.nk = 4;
  st.selfSimQ = {0.9f};
  st.selfSimK = {0.9f, 0.9f, 0.9f, 0.5f};
  core::Stage1Mask cm;
  cm.pooledProb = {0.4f, 0.3f, 0.2999f, 0.0001f};
  cm.reasons = {core::kReasonSelected, core::kReasonSelected, 0, 0};
  cm.mask = {1, 1, 0, 0};
  core::HeadResult gr;
  gr.pooledProb = cm.pooledProb;
  gr.selfSimQ = st.selfSimQ;
  gr.selfSimK = st.selfSimK;
  core::HeadParams p;
  p.mode = core::SelectMode::TopK;
  p.theta = 0.6;
  EXPECT_TRUE(explained(st, cm, gr, p, 0, 2));   // 0.2999 vs the boundary 0.3: a tie
  EXPECT_FALSE(explained(st, cm, gr, p, 0, 3));  // 0.0001 is far from the boundary
  p.theta = 0.50001;                             // block 3's similarity sits on θ
  EXPECT_TRUE(explained(st, cm, gr, p, 0, 3));
  p.theta = 0.6;
  p.mode = core::SelectMode::Cdf;
  p.tau = 0.7;  // cdf after two blocks is 0.7: the τ boundary
  EXPECT_TRUE(explained(st, cm, gr, p, 0, 3));
  p.tau = 0.85;
  EXPECT_FALSE(explained(st, cm, gr, p, 0, 3));
}

// Local windows (with and without causal) and the diagonal extension: validity, reasons and masks as the CPU
// engine's.
TEST(CudaStage1, MasksMatchCpuWithWindowsAndTheDiagonal) {
  REQUIRE_GPU();
  MaskTally tally;
  struct Case {
    Shape shape;
    core::Window window;
  };
  for (const Case& c : {Case{Shape{1, 2, 2, 1000, 1000, 64, DType::Float16, true}, {200, -1}},
                        Case{Shape{1, 2, 1, 900, 1100, 128, DType::Float16, false}, {150, 100}},
                        Case{Shape{1, 2, 2, 700, 700, 64, DType::BFloat16, false}, {-1, 0}},
                        Case{Shape{1, 2, 1, 800, 900, 256, DType::BFloat16, true}, {300, -1}},
                        Case{Shape{1, 2, 2, 600, 600, 256, DType::Float16, false}, {-1, -1}}}) {
    auto base = makeEntry(c.shape, 200);
    auto e = std::make_shared<EntryData>(*base);
    e->info.window = c.window;
    CudaEngine gpu;
    gpu.setEntry(e);
    for (Geometry g : {core::kGeometry128x64, core::kGeometry64x128})
      for (bool diagonal : {false, true}) {
        core::HeadParams p;
        p.theta = 0.3;
        p.mode = core::SelectMode::TopK;
        p.topk = 0.2;
        core::RunConfig cfg = makeConfig(g, true, p);
        cfg.diagonal = diagonal;
        compareMasks(*e, cfg, gpu, tally);
      }
  }
  EXPECT_EQ(tally.unexplained, 0) << tally.firstUnexplained;
  EXPECT_GT(tally.blocks, 0);
}

TEST(CudaStage1, MasksMatchCpuAcrossSweep) {
  REQUIRE_GPU();
  MaskTally tally;
  std::vector<Shape> shapes(3);
  shapes[0] = Shape{1, 4, 2, 1000, 1000, 64, DType::Float16, false};
  shapes[1] = Shape{1, 2, 2, 900, 1300, 128, DType::BFloat16, false};
  shapes[2] = Shape{2, 2, 1, 1100, 1100, 64, DType::Float16, true};
  int cases = 0;
  for (size_t si = 0; si < shapes.size(); ++si) {
    for (bool causal : {false, true}) {
      Shape s = shapes[si];
      s.causal = causal;
      auto e = makeEntry(s, 100 + (uint32_t)si);
      CudaEngine gpu;
      gpu.setEntry(e);
      for (Geometry g : {core::kGeometry128x64, core::kGeometry64x128})
        for (bool smooth : {true, false})
          for (double theta : {-0.1, 0.3, 0.6})
            for (int sel = 0; sel < 6; ++sel) {
              core::HeadParams p;
              p.theta = theta;
              static const double taus[] = {0.5, 0.9, 0.98};
              static const double topks[] = {0.1, 0.3, 0.5};
              if (sel < 3) {
                p.mode = core::SelectMode::Cdf;
                p.tau = taus[sel];
              } else {
                p.mode = core::SelectMode::TopK;
                p.topk = topks[sel - 3];
              }
              core::RunConfig cfg = makeConfig(g, smooth, p, /*sink=*/sel == 1);
              // Per-head parameters: head 1 gets its own θ and a dense flag on some cases.
              cfg.perHead.assign(s.Hq, p);
              cfg.perHead[1].theta = theta + 0.15;
              if (sel == 2) cfg.perHead.back().dense = true;
              compareMasks(*e, cfg, gpu, tally);
              ++cases;
            }
    }
  }
  double agree = 1.0 - double(tally.differing) / double(tally.blocks);
  std::cout << "[ mask parity ] " << cases << " configurations, " << tally.blocks << " blocks, "
            << tally.differing << " differ (" << agree * 100 << "% agree), " << tally.unexplained
            << " unexplained; pooled P close on " << tally.probClose << "/" << tally.probTotal << "\n";
  EXPECT_GE(agree, 0.999);
  EXPECT_EQ(tally.unexplained, 0) << tally.firstUnexplained;
  EXPECT_GE(double(tally.probClose) / double(tally.probTotal), 0.999);
}

// Rows of every length class of the warp-per-row selection (1 to 32 probabilities a lane: 24 to 625 key
// blocks) and the same rows through the CTA kernel that takes longer ones (SPARGE_SELECT_CTA forces it):
// masks, reasons and P̂ as the CPU engine's, in CDF and top-k mode.
TEST(CudaStage1, LongRowsMatchCpuInBothSelectionKernels) {
  REQUIRE_GPU();
  for (bool cta : {false, true}) {
    const sparge::test::ScopedEnv selectCta("SPARGE_SELECT_CTA",
                                            cta ? std::optional<std::string>("1") : std::nullopt);
    MaskTally tally;
    for (auto [n, causal] : {std::pair{1500, false},
                             {3000, true},
                             {6000, false},
                             {12000, true},
                             {24000, false},
                             {40000, true}}) {
      auto e = makeEntry(Shape{1, 2, 1, n, n, 64, DType::Float16, causal}, 300 + (uint32_t)n);
      CudaEngine gpu;
      gpu.setEntry(e);
      for (int sel = 0; sel < 2; ++sel) {
        core::HeadParams p;
        p.theta = 0.3;
        p.mode = sel == 0 ? core::SelectMode::Cdf : core::SelectMode::TopK;
        p.tau = 0.9;
        p.topk = 0.3;
        compareMasks(*e, makeConfig(core::kGeometry128x64, true, p), gpu, tally);
      }
    }
    EXPECT_EQ(tally.unexplained, 0) << (cta ? "CTA kernel: " : "warp kernel: ") << tally.firstUnexplained;
    EXPECT_GE(double(tally.probClose) / double(tally.probTotal), 0.999)
        << (cta ? "CTA kernel" : "warp kernel");
    EXPECT_GT(tally.blocks, 2 * 313 * 625);
  }
}

// Key blocks of a few repeated patterns (every row of a block the same vector) give rows of exactly tied
// probabilities: top-k must take the tied blocks at its boundary lowest index first, as the CPU engine's
// stable order does. Exact agreement, no near-tie allowance; rows of every lane width of the warp kernel.
TEST(CudaStage1, TopKTakesTiedBlocksLowestFirst) {
  REQUIRE_GPU();
  for (int nk : {24, 100, 200, 400})
    for (int patterns : {1, 3}) {
      SCOPED_TRACE("nk " + std::to_string(nk) + " patterns " + std::to_string(patterns));
      const int D = 64, BK = core::kGeometry128x64.blockK, n = nk * BK;
      auto e = makeEntry(Shape{1, 2, 1, 512, n, D, DType::Float16, false}, 900 + (uint32_t)nk);
      std::mt19937 rng(nk);
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<std::vector<float>> pattern(patterns, std::vector<float>(D));
      for (auto& v : pattern)
        for (float& x : v) x = roundTo(nd(rng), DType::Float16);
      for (int t = 0; t < n; ++t) {
        const int j = t / BK, which = patterns == 1 ? 0 : (j % 5 == 0 ? 0 : j % 5 < 3 ? 1 : 2);
        std::copy(pattern[which].begin(), pattern[which].end(), e->k.data() + (size_t)t * D);
      }
      core::HeadParams p;
      p.theta = -0.1;
      p.mode = core::SelectMode::TopK;
      p.topk = 0.3;
      const core::RunConfig cfg =
          makeConfig(core::kGeometry128x64, false, p);  // smoothing would zero one pattern
      CudaEngine gpu;
      gpu.setEntry(e);
      core::RunOptions opt;
      opt.computeError = false;
      const core::EntryResult gr = gpu.run(cfg, opt);
      const int want = int(0.3f * float(nk));
      for (const core::HeadResult& hr : gr.heads) {
        const core::EntryInfo& in = e->info;
        const core::BlockStats st =
            core::computeBlockStats(e->qHead(0, hr.head), in.tokensQ, e->kHead(0, 0), in.tokensKV, D,
                                    in.dtype, cfg.geometry, cfg.smoothK, false, in.window);
        const core::Stage1Mask cm = core::selectBlocks(st, p, {false, false}, in.tokensQ, in.tokensKV);
        for (int i = 0; i < hr.nq; ++i) {
          const size_t row = (size_t)i * nk;
          int taken = 0;
          for (int j = 0; j < nk; ++j) {
            ASSERT_EQ(hr.blockMask[row + j], cm.mask[row + j])
                << "head " << hr.head << " block (" << i << "," << j << ")";
            taken += hr.blockMask[row + j];
          }
          EXPECT_EQ(taken, want) << "head " << hr.head << " row " << i;
          // Within one probability, the taken blocks come before the others.
          for (int j = 1; j < nk; ++j)
            for (int j0 = 0; j0 < j; ++j0) {
              if (hr.pooledProb[row + j0] != hr.pooledProb[row + j]) continue;
              ASSERT_GE(hr.blockMask[row + j0], hr.blockMask[row + j])
                  << "row " << i << " blocks " << j0 << ", " << j;
            }
        }
      }
    }
}

// ---------------------------------------------------------------------------------------------
// Stage 2: outputs and PV-skip maps for the GPU's own mask, against the CPU kernel on the same mask.

// A same-precision straightforward implementation (FlashAttention-3's yardstick): half scores,
// fp32 softmax rounded to half, half output, over exactly the keys the sparse kernel attends to.
std::vector<float> halfPrecisionAttention(const EntryData& e, int b, int h, const Geometry& g,
                                          const std::vector<uint8_t>& mask,
                                          const std::vector<uint8_t>& skipped) {
  const core::EntryInfo& in = e.info;
  const int D = (int)in.headDim, nk = (int)core::ceilDiv(in.tokensKV, g.blockK);
  const float* q = e.qHead(b, h);
  const float* k = e.kHead(b, in.kvHeadOf(h));
  const float* v = e.vHead(b, in.kvHeadOf(h));
  std::vector<float> out((size_t)in.tokensQ * D, 0.f), s(in.tokensKV);
  for (int64_t t = 0; t < in.tokensQ; ++t) {
    int i = (int)(t / g.blockQ);
    float mx = -INFINITY;
    for (int64_t u = 0; u < in.tokensKV; ++u) {
      int j = (int)(u / g.blockK);
      bool on = mask[(size_t)i * nk + j] && !skipped[(size_t)i * nk + j] && !(in.causal && u > t);
      if (!on) {
        s[u] = -INFINITY;
        continue;
      }
      float dot = 0;
      for (int d = 0; d < D; ++d) dot += q[t * D + d] * k[u * D + d];
      s[u] = roundTo(roundTo(dot, in.dtype) * (float)in.scale, in.dtype);
      mx = std::max(mx, s[u]);
    }
    if (mx == -INFINITY) continue;
    double sum = 0;
    for (int64_t u = 0; u < in.tokensKV; ++u) sum += s[u] == -INFINITY ? 0.0 : std::exp(double(s[u] - mx));
    std::vector<float> acc(D, 0.f);
    for (int64_t u = 0; u < in.tokensKV; ++u) {
      if (s[u] == -INFINITY) continue;
      float pr = roundTo(float(std::exp(double(s[u] - mx)) / sum), in.dtype);
      for (int d = 0; d < D; ++d) acc[d] += pr * v[u * D + d];
    }
    for (int d = 0; d < D; ++d) out[t * D + d] = roundTo(acc[d], in.dtype);
  }
  return out;
}

struct Stage2Case {
  Shape shape;
  Geometry g;
  core::HeadParams p;
  bool loud = false;
  bool denseHead1 = false;  // head 1 marked dense (the sparse kernel walks its full LUT, no skip)
};

void checkStage2(const Stage2Case& c, uint32_t seed, int64_t* totalSkips = nullptr) {
  auto e = makeEntry(c.shape, seed, c.loud);
  CudaEngine gpu;
  gpu.setEntry(e);
  core::RunConfig cfg = makeConfig(c.g, true, c.p);
  if (c.denseHead1) {
    cfg.perHead.assign(c.shape.Hq, c.p);
    cfg.perHead[1].dense = true;
  }
  core::RunOptions opt;
  opt.keepOutput = true;
  opt.computeError = true;
  core::EntryResult gr = gpu.run(cfg, opt);
  const core::EntryInfo& in = e->info;
  core::CpuEngine cpu(0);
  cpu.setEntry(e);
  core::EntryResult cr = cpu.run(cfg, opt);
  ASSERT_EQ(gr.heads.size(), cr.heads.size());
  for (size_t x = 0; x < gr.heads.size(); ++x) {
    const core::HeadResult& hg = gr.heads[x];
    const core::HeadResult& hc = cr.heads[x];
    SCOPED_TRACE("b " + std::to_string(hg.batch) + " head " + std::to_string(hg.head));
    const int64_t hk = in.kvHeadOf(hg.head);
    // CPU kernel on the GPU's mask.
    double lambda = hg.params.dense ? INFINITY : hg.params.lambda;
    core::AttentionOutput ref = core::blockSparseAttention(
        e->qHead(hg.batch, hg.head), e->kHead(hg.batch, hk), e->vHead(hg.batch, hk), in.tokensQ, in.tokensKV,
        in.headDim, in.headDimV, in.scale, in.causal, c.g, hg.blockMask.data(), lambda, false);
    EXPECT_EQ(hg.pvSkipped, ref.pvSkipped) << "PV-skip maps differ";
    EXPECT_EQ(hg.emptyRows, ref.emptyRows);
    if (totalSkips)
      for (uint8_t s : hg.pvSkipped) *totalSkips += s;
    std::vector<float> half =
        halfPrecisionAttention(*e, (int)hg.batch, (int)hg.head, c.g, hg.blockMask, ref.pvSkipped);
    double errGpu = 0, errHalf = 0;
    ASSERT_EQ(hg.output.size(), ref.out.size());
    for (size_t t = 0; t < ref.out.size(); ++t) {
      ASSERT_TRUE(std::isfinite(hg.output[t])) << "non-finite output at " << t;
      errGpu = std::max(errGpu, (double)std::fabs(hg.output[t] - ref.out[t]));
      errHalf = std::max(errHalf, (double)std::fabs(half[t] - ref.out[t]));
    }
    EXPECT_LE(errGpu, 2.0 * errHalf + 1e-6) << "max error " << errGpu << " vs same-precision " << errHalf;
    // With the same mask the engines agree on counts and (within half rounding) on the error.
    if (hg.blockMask == hc.blockMask) {
      EXPECT_EQ(hg.sparsity.selectedBlocks, hc.sparsity.selectedBlocks);
      EXPECT_EQ(hg.sparsity.validBlocks, hc.sparsity.validBlocks);
      EXPECT_DOUBLE_EQ(hg.sparsity.validArea, hc.sparsity.validArea);
      EXPECT_EQ(hg.sparsity.skippedPvBlocks, hc.sparsity.skippedPvBlocks);
      EXPECT_NEAR(hg.error.l1(), hc.error.l1(), 5e-3 + 0.05 * hc.error.l1());
      EXPECT_EQ(hg.error.count, hc.error.count);
      ASSERT_EQ(hg.qBlockL1.size(), hc.qBlockL1.size());
      for (size_t i = 0; i < hg.qBlockL1.size(); ++i)
        EXPECT_NEAR(hg.qBlockL1[i], hc.qBlockL1[i], 1e-2 + 0.05 * hc.qBlockL1[i]);
    }
    ASSERT_EQ(hg.refBlockMass.size(), hc.refBlockMass.size());
    for (size_t t = 0; t < hg.refBlockMass.size(); ++t)
      EXPECT_NEAR(hg.refBlockMass[t], hc.refBlockMass[t], 2e-4);
  }
}

TEST(CudaStage2, MatchesCpuOnSameMaskAcrossShapes) {
  REQUIRE_GPU();
  core::HeadParams cdf;
  cdf.theta = 0.3;
  cdf.tau = 0.9;
  cdf.lambda = 50;
  core::HeadParams topk = cdf;
  topk.mode = core::SelectMode::TopK;
  topk.topk = 0.3;
  std::vector<Stage2Case> cases = {
      {Shape{1, 4, 2, 1000, 1000, 64, DType::Float16, false}, core::kGeometry128x64, cdf},
      {Shape{1, 4, 2, 1000, 1000, 64, DType::Float16, true}, core::kGeometry64x128, topk},
      {Shape{1, 2, 2, 333, 333, 128, DType::Float16, true}, core::kGeometry128x64, topk},
      {Shape{1, 2, 1, 300, 520, 128, DType::BFloat16, false}, core::kGeometry64x128, cdf},
      {Shape{2, 2, 2, 520, 300, 64, DType::BFloat16, true}, core::kGeometry128x64, cdf},
      {Shape{1, 2, 2, 130, 700, 128, DType::Float16, true}, core::kGeometry64x128, cdf},
  };
  uint32_t seed = 7;
  for (const auto& c : cases) {
    SCOPED_TRACE("Nq " + std::to_string(c.shape.Nq) + " Nkv " + std::to_string(c.shape.Nkv) + " D " +
                 std::to_string(c.shape.D) + " causal " + std::to_string(c.shape.causal) + " " + c.g.label());
    checkStage2(c, seed++);
  }
}

TEST(CudaStage2, PvSkipMatchesCpu) {
  REQUIRE_GPU();
  core::HeadParams p;
  p.theta = -0.1;
  p.mode = core::SelectMode::TopK;
  p.topk = 1.0;
  p.lambda = 4.0;
  int64_t skips = 0;
  for (Geometry g : {core::kGeometry128x64, core::kGeometry64x128})
    for (bool causal : {false, true}) {
      Stage2Case c{Shape{1, 2, 2, 1024, 1024, 64, DType::Float16, causal}, g, p, /*loud=*/true};
      checkStage2(c, 31, &skips);
      c.shape.D = 128;
      checkStage2(c, 32, &skips);
    }
  EXPECT_GT(skips, 0) << "the structured data should make the PV skip fire";
}

// Head dim 256 (the mma.sync family in both geometries, also on Hopper): outputs, PV-skip maps, counts and
// error sums against the CPU engine on the same mask; causal and not, GQA, bf16, partial tiles.
TEST(CudaStage2, HeadDim256MatchesCpu) {
  REQUIRE_D256_ENGINE();
  core::HeadParams topk;
  topk.theta = 0.3;
  topk.mode = core::SelectMode::TopK;
  topk.topk = 0.3;
  topk.lambda = 50;
  core::HeadParams cdf = topk;
  cdf.mode = core::SelectMode::Cdf;
  cdf.tau = 0.9;
  core::HeadParams skip = topk;  // every block, the PV skip alone decides
  skip.theta = -0.1;
  skip.topk = 1.0;
  skip.lambda = 4.0;
  const std::vector<Stage2Case> cases = {
      {Shape{1, 4, 2, 600, 600, 256, DType::Float16, true}, core::kGeometry128x64, topk},
      {Shape{1, 2, 1, 333, 520, 256, DType::BFloat16, false}, core::kGeometry64x128, cdf},
      {Shape{1, 2, 2, 520, 300, 256, DType::Float16, true}, core::kGeometry64x128, topk, false, true},
      {Shape{1, 2, 2, 768, 768, 256, DType::Float16, false}, core::kGeometry128x64, skip, /*loud=*/true},
      {Shape{1, 2, 2, 768, 768, 256, DType::Float16, true}, core::kGeometry64x128, skip, /*loud=*/true},
  };
  uint32_t seed = 41;
  int64_t skips = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE("Nq " + std::to_string(c.shape.Nq) + " Nkv " + std::to_string(c.shape.Nkv) + " causal " +
                 std::to_string(c.shape.causal) + " " + c.g.label());
    const int64_t sm90Before = attentionSm90LaunchCount();
    checkStage2(c, seed++, &skips);
    EXPECT_EQ(attentionSm90LaunchCount(), sm90Before) << "D 256 has no Hopper kernel: mma.sync must run";
  }
  EXPECT_GT(skips, 0) << "the structured data should make the PV skip fire";
}

TEST(CudaStage2, DenseHeadSelectsEveryValidBlockAndNeverSkips) {
  REQUIRE_GPU();
  Shape s{1, 2, 2, 700, 700, 64, DType::Float16, true};
  auto e = makeEntry(s, 5, true);
  CudaEngine gpu;
  gpu.setEntry(e);
  core::HeadParams p;
  p.dense = true;
  p.lambda = 0.0;
  core::RunOptions opt;
  core::EntryResult r = gpu.run(makeConfig(core::kGeometry128x64, true, p), opt);
  for (const auto& h : r.heads) {
    EXPECT_EQ(h.sparsity.selectedBlocks, h.sparsity.validBlocks);
    EXPECT_EQ(h.sparsity.skippedPvBlocks, 0);
    EXPECT_LT(h.error.l1(), 5e-3);  // dense: only half-precision rounding
    EXPECT_GT(h.error.cosSim(), 0.9999);
  }
  EXPECT_TRUE(r.times.clock == "cuda-event");
  // A second run reuses the cached reference.
  core::EntryResult r2 = gpu.run(makeConfig(core::kGeometry128x64, true, p), opt);
  EXPECT_TRUE(r2.times.referenceCached);
  EXPECT_EQ(r2.heads[0].error.absDiff, r.heads[0].error.absDiff);
}

// Runs the attention kernel directly (no engine) on a one-head fp16 causal entry with a hand-made block mask,
// output poisoned first, λ = 0; returns the output bits, the PV-skip map and the empty-row counter.
struct DirectRun {
  std::vector<uint16_t> out;
  std::vector<uint8_t> skipped;
  std::vector<int32_t> validCount;  // LUT entries per q-tile, as encoded from the mask
  int emptyRows = -1;
};

void runKernelOnMask(const EntryData& e, const core::Geometry& g, const std::vector<uint8_t>& mask,
                     DirectRun& r) {
  const int N = int(e.info.tokensQ), D = int(e.info.headDim);
  const int nq = int(core::ceilDiv(N, g.blockQ)), nk = int(core::ceilDiv(N, g.blockK));
  std::vector<int32_t> lut(nq * nk, 0), count(nq, 0);
  for (int i = 0; i < nq; ++i) core::encodeLutRow(mask.data() + i * nk, nk, lut.data() + i * nk, &count[i]);
  r.validCount = count;
  auto toBits = [](const core::FloatBuffer& x) {
    std::vector<uint16_t> b(x.size());
    for (size_t t = 0; t < x.size(); ++t) b[t] = core::floatToHalf(x[t]);
    return b;
  };
  auto q = toBits(e.q), k = toBits(e.k), v = toBits(e.v);
  void *dq, *dk, *dv, *dout, *dlut, *dcount, *dparams, *dheads, *dskip, *dempty;
  ASSERT_EQ(cudaMalloc(&dq, q.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dk, k.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dv, v.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, q.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dlut, lut.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dcount, count.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dparams, sizeof(HeadParamsDev)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dheads, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dskip, nq * nk), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dempty, sizeof(int)), cudaSuccess);
  HeadParamsDev hp;
  hp.lambda = 0.f;
  int head = 0;
  cudaMemcpy(dq, q.data(), q.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dk, k.data(), k.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(dout, 0x7f, q.size() * 2);  // poison: every row must be written
  cudaMemcpy(dlut, lut.data(), lut.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dcount, count.data(), count.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dparams, &hp, sizeof hp, cudaMemcpyHostToDevice);
  cudaMemcpy(dheads, &head, sizeof head, cudaMemcpyHostToDevice);
  cudaMemset(dskip, 0, nq * nk);
  cudaMemset(dempty, 0, sizeof(int));
  Problem p;
  p.Nq = p.Nkv = N;
  p.D = D;
  p.BQ = g.blockQ;
  p.BK = g.blockK;
  p.nq = nq;
  p.nk = nk;
  p.causal = true;
  p.heads = static_cast<int*>(dheads);
  p.nHeads = 1;
  AttnArgs a;
  a.q = dq;
  a.k = dk;
  a.v = dv;
  a.o = dout;
  a.scaleLog2 = float(e.info.scale * 1.4426950408889634);
  a.lut = static_cast<int32_t*>(dlut);
  a.validCount = static_cast<int32_t*>(dcount);
  a.params = static_cast<HeadParamsDev*>(dparams);
  a.pvSkipped = static_cast<uint8_t*>(dskip);
  a.emptyRows = static_cast<int*>(dempty);
  launchAttention(ElemType::F16, p, a, false, 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  r.out.resize(q.size());
  r.skipped.resize(nq * nk);
  cudaMemcpy(r.out.data(), dout, r.out.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(&r.emptyRows, dempty, sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(r.skipped.data(), dskip, r.skipped.size(), cudaMemcpyDeviceToHost);
  for (void* ptr : {dq, dk, dv, dout, dlut, dcount, dparams, dheads, dskip, dempty}) cudaFree(ptr);
}

// Rows that see no key (a row whose only block lies after it under causal masking, and a q-tile
// with an empty LUT row) are written as 0 and counted; the other rows match the CPU kernel.
TEST(CudaStage2, EmptyRowsAreZeroAndCounted) {
  REQUIRE_GPU();
  const int N = 256, D = 64, nq = 2, nk = 4;
  Shape s{1, 1, 1, N, N, D, DType::Float16, true};
  auto e = makeEntry(s, 77);
  // Row 0 (queries 0..127) visits only K block 1 (keys 64..127): queries 0..63 see nothing.
  // Row 1 visits nothing at all.
  std::vector<uint8_t> mask(nq * nk, 0);
  mask[0 * nk + 1] = 1;
  DirectRun run;
  ASSERT_NO_FATAL_FAILURE(runKernelOnMask(*e, core::kGeometry128x64, mask, run));
  ASSERT_EQ(run.validCount[0], 1);
  ASSERT_EQ(run.validCount[1], 0);
  const std::vector<uint16_t>& out = run.out;
  const int empty = run.emptyRows;

  core::AttentionOutput ref =
      core::blockSparseAttention(e->q.data(), e->k.data(), e->v.data(), N, N, D, D, e->info.scale, true,
                                 core::kGeometry128x64, mask.data(), 0.0, false);
  EXPECT_EQ(empty, 64 + 128);
  EXPECT_EQ(ref.emptyRows, 64 + 128);
  double maxErr = 0;
  for (int t = 0; t < N; ++t)
    for (int d = 0; d < D; ++d) {
      float o = core::halfToFloat(out[(size_t)t * D + d]);
      bool emptyRow = t < 64 || t >= 128;
      if (emptyRow)
        ASSERT_EQ(o, 0.f) << "row " << t;
      else
        maxErr = std::max(maxErr, (double)std::fabs(o - ref.out[(size_t)t * D + d]));
    }
  EXPECT_LT(maxErr, 1e-2);
}

TEST(CudaEngineErrors, UnsupportedShapesAndMissingEntryAreClearErrors) {
  REQUIRE_GPU();
  CudaEngine gpu;
  core::RunOptions opt;
  EXPECT_THROW(gpu.run(core::RunConfig{}, opt), sparge::Error);
  Shape s{1, 1, 1, 256, 256, 64, DType::Float16, false};
  auto e = makeEntry(s, 1);
  for (int64_t d : {32, 96, 192}) {
    auto bad = std::make_shared<EntryData>(*e);
    bad->info.headDim = bad->info.headDimV = d;
    gpu.setEntry(bad);
    try {
      gpu.run(core::RunConfig{}, opt);
      FAIL() << "expected sparge::Error for D " << d;
    } catch (const sparge::Error& err) {
      const std::string msg = err.what();
      EXPECT_NE(msg.find("head dim " + std::to_string(d) + " is not supported"), std::string::npos) << msg;
      EXPECT_NE(msg.find("64, 128 or 256"), std::string::npos) << msg;
    }
  }
  gpu.setEntry(e);
  opt.heads = {5};
  EXPECT_THROW(gpu.run(core::RunConfig{}, opt), sparge::Error);
}

// ---------------------------------------------------------------------------------------------
// Hopper (wgmma) Stage-2 kernel (64x128 tiles, and 128x64 in exact numerics), which the launcher picks on an
// sm_90 GPU.

// The shared-memory tile layout against the canonical 128-byte-swizzled wgmma layouts as the
// descriptors describe them (fields decoded from the descriptor bits, swizzle applied to the byte
// address): every element a k-step of Q·Kᵀ or P·V reads must be the element the copy stored there.
int64_t descField(uint64_t d, int lo, int bits) {
  return (int64_t)((d >> lo) & ((1ull << bits) - 1));
}

template <int R, int D>
void checkKMajor(uint32_t tileAddr) {
  for (int ks = 0; ks < D / 16; ++ks) {
    uint64_t d = sm90::kMajorDescriptor<R>(tileAddr, ks);
    ASSERT_EQ(descField(d, 62, 2), 1) << "128-byte swizzle";
    ASSERT_EQ(descField(d, 49, 3), 0) << "base offset";
    uint32_t start = (uint32_t)descField(d, 0, 14) << 4, sbo = (uint32_t)descField(d, 32, 14) << 4;
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 16; ++k) {
        uint32_t lin = start + (uint32_t)(r / 8) * sbo + (uint32_t)(r % 8) * 128u + (uint32_t)k * 2u;
        uint32_t want = tileAddr + 2u * (uint32_t)sm90::tileElemOffset<R>(r, 16 * ks + k);
        ASSERT_EQ(sm90::swizzle128(lin), want)
            << "R " << R << " D " << D << " ks " << ks << " row " << r << " k " << k;
      }
  }
}

template <int D>
void checkMnMajor(uint32_t tileAddr) {
  constexpr int R = 128;
  for (int kk = 0; kk < R / 16; ++kk) {
    uint64_t d = sm90::mnMajorDescriptor<R>(tileAddr, kk);
    ASSERT_EQ(descField(d, 62, 2), 1);
    uint32_t start = (uint32_t)descField(d, 0, 14) << 4, lbo = (uint32_t)descField(d, 16, 14) << 4,
             sbo = (uint32_t)descField(d, 32, 14) << 4;
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < D; ++n) {
        uint32_t lin = start + (uint32_t)(n / 64) * lbo + (uint32_t)(k / 8) * sbo + (uint32_t)(k % 8) * 128u +
                       (uint32_t)(n % 64) * 2u;
        uint32_t want = tileAddr + 2u * (uint32_t)sm90::tileElemOffset<R>(16 * kk + k, n);
        ASSERT_EQ(sm90::swizzle128(lin), want) << "D " << D << " kk " << kk << " key " << k << " n " << n;
      }
  }
}

template <int R, int D>
void checkBijection() {
  std::vector<int> seen(R * D, 0);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < D; ++c) {
      int off = sm90::tileElemOffset<R>(r, c);
      ASSERT_GE(off, 0);
      ASSERT_LT(off, R * D);
      ++seen[off];
    }
  for (int x : seen) ASSERT_EQ(x, 1);
}

TEST(Sm90Layout, DescriptorsAddressTheStoredTiles) {
  const uint32_t base = 5 * 1024;  // any 1024-byte-aligned shared address
  checkBijection<64, 64>();
  checkBijection<64, 128>();
  checkBijection<128, 64>();
  checkBijection<128, 128>();
  checkKMajor<64, 64>(base);    // Q, D = 64
  checkKMajor<64, 128>(base);   // Q, D = 128
  checkKMajor<128, 64>(base);   // K, D = 64
  checkKMajor<128, 128>(base);  // K, D = 128
  checkMnMajor<64>(base);       // V, D = 64
  checkMnMajor<128>(base);      // V, D = 128
  // The check can fail: a plain row-major store (no swizzle) is not where row 1, chunk 0 is read.
  EXPECT_NE(sm90::swizzle128(base + 128u), base + 128u);
}

// The kernel builds a tile's descriptor once and moves it on per k-step (advanceDescriptor). Against the
// descriptor built from the step's address, for every step and for tiles up to the top of shared memory,
// where an add that carried out of the 14-bit address field would show.
template <int R, int kSlabBytes, int kRowBytes>
void checkAdvancedKMajor(uint32_t tileAddr) {
  const uint64_t d0 = sm90::kMajorDescriptorBytes<R, kSlabBytes>(tileAddr, 0);
  for (int off = 0; off < kRowBytes; off += 32)
    ASSERT_EQ(sm90::advanceDescriptor(d0, sm90::kMajorStepBytes<R, kSlabBytes>(off)),
              (sm90::kMajorDescriptorBytes<R, kSlabBytes>(tileAddr, off)))
        << "R " << R << " slab " << kSlabBytes << " tile " << tileAddr << " offset " << off;
}

TEST(Sm90Layout, AdvancedDescriptorsEqualRebuiltOnes) {
  constexpr uint32_t kTop = 227 * 1024;  // the most shared memory an sm_90 CTA has
  for (uint32_t tile = 0; tile + 16384 <= kTop; tile += 1024) {
    checkAdvancedKMajor<64, 128, 128>(tile);   // Q, fp16 D 64 / e4m3 D 128
    checkAdvancedKMajor<128, 128, 256>(tile);  // K, fp16 D 128 (two slabs)
    checkAdvancedKMajor<128, 64, 64>(tile);    // K, e4m3 D 64 (64-byte swizzle)
    checkAdvancedKMajor<128, 128, 128>(tile);  // e4m3 V, 128 keys
    const uint64_t v0 = sm90::mnMajorDescriptor<128>(tile, 0);
    for (int kk = 0; kk < 8; ++kk)
      ASSERT_EQ(sm90::advanceDescriptor(v0, kk * 2u * sm90::kSwizzleAtomBytes),
                sm90::mnMajorDescriptor<128>(tile, kk))
          << "V tile " << tile << " kk " << kk;
  }
  // It can fail: a tile whose second slab lies past 256 KB wraps in the rebuilt descriptor and carries in the
  // advanced one.
  constexpr uint32_t kHigh = 256 * 1024 - 1024;
  EXPECT_NE(sm90::advanceDescriptor(sm90::kMajorDescriptorBytes<128, 128>(kHigh, 0),
                                    sm90::kMajorStepBytes<128, 128>(128)),
            (sm90::kMajorDescriptorBytes<128, 128>(kHigh, 128)));
}

bool deviceIsSm90(std::string* why) {
  if (!deviceUsable(why)) return false;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    *why = "cannot read the compute capability";
    return false;
  }
  if (major != 9 || minor != 0) {
    *why = "compute capability " + std::to_string(major) + "." + std::to_string(minor) + ", not 9.0";
    return false;
  }
  return true;
}

#define REQUIRE_SM90()                                                   \
  do {                                                                   \
    std::string why;                                                     \
    if (!deviceIsSm90(&why)) GTEST_SKIP() << "no sm_90 device: " << why; \
  } while (0)

// checkStage2 with the wgmma kernel, failing unless that kernel actually ran.
void checkStage2Sm90(const Stage2Case& c, uint32_t seed, int64_t* totalSkips = nullptr) {
  ASSERT_EQ(c.g.blockQ, 64);
  ASSERT_EQ(c.g.blockK, 128);
  int64_t before = attentionSm90LaunchCount();
  checkStage2(c, seed, totalSkips);
  EXPECT_GT(attentionSm90LaunchCount(), before) << "the sm90 kernel did not run";
}

TEST(CudaStage2Sm90, OnlySelectedForItsGeometriesOnSm90) {
  REQUIRE_SM90();
  Problem p;
  p.D = 128;
  p.BQ = 64;
  p.BK = 128;
  EXPECT_FALSE(attentionSm90Selected(p, core::Numerics::None, AttnFamily::Sm80));
  EXPECT_TRUE(attentionSm90Selected(p));
  p.D = 256;  // no wgmma kernel at D 256: the mma.sync family runs it (kernel names end in _sm80)
  EXPECT_FALSE(attentionSm90Selected(p));
  EXPECT_FALSE(attentionSm90Selected(p, core::Numerics::Int8Fp8));
  p.D = 128;
  p.BQ = 128;
  p.BK = 64;  // 128x64: the Hopper kernel in exact numerics, the mma.sync family in quantized ones
  EXPECT_TRUE(attentionSm90Selected(p));
  EXPECT_FALSE(attentionSm90Selected(p, core::Numerics::Int8Fp8));
  EXPECT_FALSE(attentionSm90Selected(p, core::Numerics::Int8Fp16));
  p.BQ = 64;
  p.BK = 64;  // no such geometry in the product; the launcher must not claim it
  EXPECT_FALSE(attentionSm90Selected(p));
}

TEST(CudaStage2Sm90, MatchesCpuOnSameMaskAcrossShapes) {
  REQUIRE_SM90();
  core::HeadParams cdf;
  cdf.theta = 0.3;
  cdf.tau = 0.9;
  cdf.lambda = 50;
  core::HeadParams topk = cdf;
  topk.mode = core::SelectMode::TopK;
  topk.topk = 0.3;
  const Geometry g = core::kGeometry64x128;
  std::vector<Stage2Case> cases = {
      {Shape{1, 4, 2, 1000, 1000, 64, DType::Float16, false}, g, cdf},
      {Shape{1, 4, 2, 1000, 1000, 64, DType::Float16, true}, g, topk},
      {Shape{1, 2, 2, 333, 333, 128, DType::Float16, true}, g, topk},
      {Shape{1, 2, 1, 300, 520, 128, DType::BFloat16, false}, g, cdf},
      {Shape{2, 2, 2, 520, 300, 64, DType::BFloat16, true}, g, cdf},
      {Shape{1, 2, 2, 130, 700, 128, DType::Float16, true}, g, cdf},
      {Shape{1, 4, 1, 777, 901, 128, DType::BFloat16, true}, g, topk, false, /*denseHead1=*/true},
      {Shape{1, 2, 2, 64, 128, 64, DType::Float16, false}, g, cdf},  // exactly one tile, one block
  };
  uint32_t seed = 7;
  for (const auto& c : cases) {
    SCOPED_TRACE("Nq " + std::to_string(c.shape.Nq) + " Nkv " + std::to_string(c.shape.Nkv) + " D " +
                 std::to_string(c.shape.D) + " causal " + std::to_string(c.shape.causal) + " bf16 " +
                 std::to_string(c.shape.dtype == DType::BFloat16));
    checkStage2Sm90(c, seed++);
  }
}

TEST(CudaStage2Sm90, PvSkipMatchesCpu) {
  REQUIRE_SM90();
  core::HeadParams p;
  p.theta = -0.1;
  p.mode = core::SelectMode::TopK;
  p.topk = 1.0;
  // λ = 0: skip whenever no row of the 64-row tile raises its max (with λ = 4 the 64x128 tiles of this
  // data never skip, so the kernel's skip path would go untested).
  p.lambda = 0.0;
  int64_t skips = 0;
  for (bool causal : {false, true})
    for (DType dt : {DType::Float16, DType::BFloat16}) {
      Stage2Case c{Shape{1, 2, 2, 1024, 1024, 64, dt, causal}, core::kGeometry64x128, p, /*loud=*/true};
      SCOPED_TRACE(std::string("causal ") + (causal ? "1" : "0") +
                   (dt == DType::BFloat16 ? " bf16" : " fp16"));
      checkStage2Sm90(c, 31, &skips);
      c.shape.D = 128;
      checkStage2Sm90(c, 32, &skips);
    }
  EXPECT_GT(skips, 0) << "the structured data should make the PV skip fire";
}

TEST(CudaStage2Sm90, DenseKernelMatchesCpu) {
  REQUIRE_SM90();
  core::HeadParams p;
  p.dense = true;
  p.lambda = 0.0;
  uint32_t seed = 50;
  for (bool causal : {false, true})
    for (int D : {64, 128}) {
      Stage2Case c{Shape{1, 2, 1, 700, 900, D, D == 64 ? DType::Float16 : DType::BFloat16, causal},
                   core::kGeometry64x128, p};
      SCOPED_TRACE("dense causal " + std::to_string(causal) + " D " + std::to_string(D));
      checkStage2Sm90(c, seed++);
    }
}

// 64x128 tiles: a q-tile whose only block lies after all its rows, an empty LUT row, a partly
// visible block and a full row; poisoned output must be overwritten everywhere.
TEST(CudaStage2Sm90, EmptyRowsAreZeroAndCounted) {
  REQUIRE_SM90();
  const int N = 256, D = 64, nq = 4, nk = 2;
  Shape s{1, 1, 1, N, N, D, DType::Float16, true};
  auto e = makeEntry(s, 78);
  std::vector<uint8_t> mask(nq * nk, 0);
  mask[0 * nk + 1] = 1;  // queries 0..63 see only keys 128..255: nothing visible
  // row 1 (queries 64..127): no block at all
  mask[2 * nk + 1] = 1;  // queries 128..191 see keys 128..q
  mask[3 * nk + 0] = mask[3 * nk + 1] = 1;
  int64_t before = attentionSm90LaunchCount();
  DirectRun run;
  ASSERT_NO_FATAL_FAILURE(runKernelOnMask(*e, core::kGeometry64x128, mask, run));
  ASSERT_EQ(run.validCount[1], 0);
  ASSERT_EQ(run.validCount[3], 2);
  EXPECT_GT(attentionSm90LaunchCount(), before) << "the sm90 kernel did not run";
  const std::vector<uint16_t>& out = run.out;
  const std::vector<uint8_t>& skipped = run.skipped;
  const int empty = run.emptyRows;

  core::AttentionOutput ref =
      core::blockSparseAttention(e->q.data(), e->k.data(), e->v.data(), N, N, D, D, e->info.scale, true,
                                 core::kGeometry64x128, mask.data(), 0.0, false);
  EXPECT_EQ(ref.emptyRows, 128);
  EXPECT_EQ(empty, ref.emptyRows);
  EXPECT_EQ(skipped, ref.pvSkipped);
  double maxErr = 0;
  for (int t = 0; t < N; ++t)
    for (int d = 0; d < D; ++d) {
      float o = core::halfToFloat(out[(size_t)t * D + d]);
      if (t < 128)
        ASSERT_EQ(o, 0.f) << "row " << t;
      else
        maxErr = std::max(maxErr, (double)std::fabs(o - ref.out[(size_t)t * D + d]));
    }
  EXPECT_LT(maxErr, 1e-2);
}

}  // namespace
}  // namespace sparge::cuda
