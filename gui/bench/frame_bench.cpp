// Benchmark (prints numbers, asserts nothing): UI-thread frame time with every head of a 32K-token entry
// in the grid, rendered off-screen through EGL. Results are synthetic (no engine run): only the UI is timed.
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "app/app.h"
#include "app/platform.h"
#include "sparge/core/cpu_engine.h"
#include "views/head_grid.h"
#include "widgets/gl.h"
#include "widgets/heatmap.h"

using namespace sparge;
using namespace sparge::gui;

static std::shared_ptr<core::EntryResult> makeResult(int heads, int64_t tokens, uint64_t seed) {
  auto r = std::make_shared<core::EntryResult>();
  r->info.name = "synthetic_32k";
  r->info.batch = 1;
  r->info.headsQ = r->info.headsKV = heads;
  r->info.tokensQ = r->info.tokensKV = tokens;
  r->info.headDim = r->info.headDimV = 128;
  r->info.causal = true;
  r->engine = "synthetic";
  core::Geometry g = r->config.geometry;
  int nq = static_cast<int>(tokens / g.blockQ), nk = static_cast<int>(tokens / g.blockK);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  for (int h = 0; h < heads; ++h) {
    core::HeadResult hr;
    hr.head = h;
    hr.nq = nq;
    hr.nk = nk;
    size_t n = size_t(nq) * nk;
    hr.blockMask.assign(n, 0);
    hr.pvSkipped.assign(n, 0);
    hr.reasons.assign(n, 0);
    hr.pooledProb.assign(n, 0);
    hr.refBlockMass.assign(n, 0);
    hr.qBlockL1.assign(nq, 0);
    hr.selfSimQ.assign(nq, 0.7f);
    hr.selfSimK.assign(nk, 0.7f);
    hr.similarQ.assign(nq, 1);
    hr.similarK.assign(nk, 1);
    int band = 4 + h % 12;
    for (int i = 0; i < nq; ++i) {
      int diag = (i * g.blockQ) / g.blockK;
      for (int j = 0; j < nk; ++j) {
        size_t k = size_t(i) * nk + j;
        if (j > diag + 1) {
          hr.reasons[k] = core::kReasonCausalOff;
          continue;
        }
        float p = std::exp(-float(diag - j) / band) + (j == 0 ? 0.5f : 0.0f);
        hr.pooledProb[k] = p / (band + 1);
        hr.refBlockMass[k] = p / (band + 1);
        bool on = j == 0 || diag - j < band || u(rng) < 0.03f;
        if (on) {
          hr.blockMask[k] = 1;
          hr.reasons[k] = j == 0 ? core::kReasonSink : core::kReasonSelected;
          if (u(rng) < 0.1f) hr.pvSkipped[k] = 1;
        }
      }
      hr.qBlockL1[i] = 0.01f * u(rng);
    }
    hr.sparsity.validBlocks = n / 2;
    hr.sparsity.selectedBlocks = n / 10;
    hr.sparsity.computedPvBlocks = n / 11;
    hr.sparsity.skippedPvBlocks = n / 110;
    hr.error.absDiff = 0.01 * (1 + h % 5);
    hr.error.absRef = 1;
    r->heads.push_back(std::move(hr));
  }
  core::aggregate(*r);
  return r;
}

int main(int argc, char** argv) {
  int heads = argc > 1 ? std::atoi(argv[1]) : 32;
  int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 32768;
  int frames = argc > 3 ? std::atoi(argv[3]) : 120;
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  auto platform = makeEglPlatform();
  platform->init(PlatformConfig{1920, 1080, false, "bench"});
  std::printf("renderer: %s\n", platform->describe().c_str());
  platform->overrideMouse = true;
  {
    Session session([] { return engines::EngineSelection{std::make_unique<core::CpuEngine>(1), ""}; });
    AppSettings settings;
    App app(session, settings, *platform, true);
    app.setupStyleAndFonts(1.0f);
    app.ui().thumbSize = 96;
    session.showResultForTesting(makeResult(heads, tokens, 1));
    using Clock = std::chrono::steady_clock;
    std::vector<double> uiMs;
    auto timeFrame = [&]() {
      auto t0 = Clock::now();
      app.frame();
      auto t1 = Clock::now();
      glFinish();  // include the GPU work the frame queued (llvmpipe here: CPU rasterisation)
      uiMs.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    };
    double first = timeFrame();
    uint64_t uploadsAfterFirst = HeatmapTexture::uploads();
    std::vector<double> ms;
    for (int i = 0; i < frames; ++i) ms.push_back(timeFrame());
    uint64_t steadyUploads = HeatmapTexture::uploads() - uploadsAfterFirst;
    // A re-run that changes one head: only that head's thumbnail (and the detail panels) re-upload.
    auto r2 = makeResult(heads, tokens, 1);
    r2->heads[3].blockMask[0] ^= 1;
    uint64_t before = HeatmapTexture::uploads();
    session.showResultForTesting(r2);
    double changed = timeFrame();
    uint64_t changeUploads = HeatmapTexture::uploads() - before;
    std::sort(ms.begin(), ms.end());
    auto pct = [&](double q) { return ms[std::min(ms.size() - 1, size_t(q * ms.size()))]; };
    std::printf("entry: %d heads x %lld tokens (grid %lld x %lld blocks per head), window 1920x1080\n", heads,
                (long long)tokens, (long long)(tokens / 128), (long long)(tokens / 64));
    std::printf("first frame (uploads %llu textures): %.2f ms\n", (unsigned long long)uploadsAfterFirst,
                first);
    std::printf("steady frames (%d): min %.2f  median %.2f  p95 %.2f  max %.2f ms; texture uploads %llu\n",
                frames, ms.front(), pct(0.5), pct(0.95), ms.back(), (unsigned long long)steadyUploads);
    std::sort(uiMs.begin() + 1, uiMs.end() - 1);
    std::printf(
        "UI-thread work only (ImGui + draw lists + GL submission, no glFinish): median %.2f  p95 %.2f ms\n",
        uiMs[1 + (uiMs.size() - 2) / 2], uiMs[1 + size_t(0.95 * (uiMs.size() - 2))]);
    std::printf("frame after a one-head change: %.2f ms (%llu uploads)\n", changed,
                (unsigned long long)changeUploads);
  }
  platform->shutdown();
  ImGui::DestroyContext();
  return 0;
}
