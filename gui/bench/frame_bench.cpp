// Benchmark (prints numbers, asserts nothing), rendered off-screen through EGL:
//  1. UI frame time with every head of a synthetic 32K-token entry in the grid (no engine involved);
//  2. frame time with the overview of a 100-entry capture open (synthetic figures, no engine involved);
//  3. the latency from a slider change to updated views on a real engine (32 heads x 32K x D 128 by
//     default), for isolated changes and for a drag that moves the slider every frame, split into the
//     engine, the hand-off to the UI thread and the frame that shows the result (each part, each view);
//  4. (--only latency-methods) the same isolated changes with the curves view's methods overlay in front.
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "app/app.h"
#include "app/platform.h"
#include "app/set_option.h"
#include "sparge/core/synthetic.h"
#include "sparge/kernels/engine_factory.h"
#include "widgets/gl.h"
#include "widgets/heatmap.h"

using namespace sparge;
using namespace sparge::gui;
using Clock = std::chrono::steady_clock;

namespace {
struct Options {
  int heads = 32;
  int64_t tokens = 32768;
  int dim = 128;
  int frames = 120;
  int entries = 100;  // overview rows
  int changes = 30;   // slider changes per latency measurement
  std::string engine = "auto";
  std::string target = "auto";  // tiles and numerics of the latency runs; auto: the app's choice on this GPU
  bool grid = true, overview = true, latency = true;
  bool latencyMethods = false;  // the same slider moves with the curves view's methods overlay open
  int overlayPoints = 16;       // knob values per method in that overlay (the view's default)
  std::string screenshot;       // the window after the latency runs, as a PNG (to compare builds by eye)
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
    if (a == "--heads")
      o.heads = std::stoi(next());
    else if (a == "--tokens")
      o.tokens = std::stoll(next());
    else if (a == "--dim")
      o.dim = std::stoi(next());
    else if (a == "--frames")
      o.frames = std::stoi(next());
    else if (a == "--overview-entries")
      o.entries = std::stoi(next());
    else if (a == "--changes")
      o.changes = std::stoi(next());
    else if (a == "--engine")
      o.engine = next();
    else if (a == "--target")
      o.target = next();
    else if (a == "--screenshot")
      o.screenshot = next();
    else if (a == "--only") {
      std::string what(1, ',');  // a comma list, fenced so that names match whole
      what += next();
      what += ',';
      o.grid = what.find(",grid,") != std::string::npos;
      o.overview = what.find(",overview,") != std::string::npos;
      o.latency = what.find(",latency,") != std::string::npos;
      o.latencyMethods = what.find(",latency-methods,") != std::string::npos;
    } else {
      std::fprintf(
          stderr,
          "usage: sparge-studio-bench [--heads N] [--tokens N] [--dim N] [--frames N] "
          "[--overview-entries N] [--changes N] [--engine auto|cpu|cuda] [--target auto|sm80|sm89|sm90] "
          "[--screenshot PNG] "
          "[--only grid,overview,latency,latency-methods]\n");
      std::exit(2);
    }
  }
  return o;
}

struct Spread {
  double min = 0, median = 0, p95 = 0, max = 0;
};
Spread spread(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v[std::min(v.size() - 1, size_t(0.95 * double(v.size())))], v.back()};
}

double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// One frame including the GPU work it queued; returns its wall time in ms.
double timedFrame(App& app) {
  auto t0 = Clock::now();
  app.frame();
  glFinish();
  return ms(t0, Clock::now());
}

std::shared_ptr<core::EntryResult> makeResult(int heads, int64_t tokens, int dim, uint64_t seed) {
  auto r = std::make_shared<core::EntryResult>();
  r->info.name = "synthetic";
  r->info.batch = 1;
  r->info.headsQ = r->info.headsKV = heads;
  r->info.tokensQ = r->info.tokensKV = tokens;
  r->info.headDim = r->info.headDimV = dim;
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
        hr.pooledProb[k] = hr.refBlockMass[k] = p / (band + 1);
        if (j == 0 || diag - j < band || u(rng) < 0.03f) {
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

void benchGrid(App& app, Session& session, const Options& o) {
  session.showResultForTesting(makeResult(o.heads, o.tokens, o.dim, 1));
  double first = timedFrame(app);
  uint64_t uploadsAfterFirst = HeatmapTexture::uploads();
  std::vector<double> frames;
  for (int i = 0; i < o.frames; ++i) frames.push_back(timedFrame(app));
  uint64_t steadyUploads = HeatmapTexture::uploads() - uploadsAfterFirst;
  // A re-run that changes one head: only that head's thumbnail (and the detail panels) re-upload.
  auto r2 = makeResult(o.heads, o.tokens, o.dim, 1);
  r2->heads[3].blockMask[0] ^= 1;
  uint64_t before = HeatmapTexture::uploads();
  session.showResultForTesting(r2);
  double changed = timedFrame(app);
  Spread f = spread(frames);
  std::printf("grid: %d heads x %lld tokens (%lld x %lld blocks per head)\n", o.heads, (long long)o.tokens,
              (long long)(o.tokens / 128), (long long)(o.tokens / 64));
  std::printf("  first frame (uploads %llu textures): %.2f ms\n", (unsigned long long)uploadsAfterFirst,
              first);
  std::printf("  steady frames (%d): min %.2f  median %.2f  p95 %.2f  max %.2f ms; texture uploads %llu\n",
              o.frames, f.min, f.median, f.p95, f.max, (unsigned long long)steadyUploads);
  std::printf("  frame after a one-head change: %.2f ms (%llu uploads)\n", changed,
              (unsigned long long)(HeatmapTexture::uploads() - before));
  // A slider move changes every head: every thumbnail and the detail panels re-render and re-upload.
  std::vector<double> all;
  for (int k = 0; k < 5; ++k) {
    session.showResultForTesting(makeResult(o.heads, o.tokens, o.dim, 2 + k));
    before = HeatmapTexture::uploads();
    all.push_back(timedFrame(app));
  }
  Spread a = spread(all);
  std::printf("  frame after an every-head change (5 runs): median %.2f  max %.2f ms (%llu uploads each)\n",
              a.median, a.max, (unsigned long long)(HeatmapTexture::uploads() - before));
}

void benchOverview(App& app, Session& session, const Options& o) {
  std::vector<core::EntryInfo> entries;
  std::vector<OverviewRow> rows;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int e = 0; e < o.entries; ++e) {
    core::EntryInfo info;
    char name[32];
    std::snprintf(name, sizeof name, "l%02d_s%03d", e % 30, e / 30);
    info.name = name;
    info.layer = e % 30;
    info.step = e / 30;
    info.batch = 1;
    info.headsQ = info.headsKV = o.heads;
    info.tokensQ = info.tokensKV = o.tokens;
    info.headDim = info.headDimV = o.dim;
    entries.push_back(info);
    OverviewRow row;
    row.entry = info.name;
    for (int h = 0; h < o.heads; ++h) {
      HeadFigures f;
      f.sparsity.validBlocks = f.sparsity.selectedBlocks = 1000;
      f.sparsity.computedPvBlocks = static_cast<int64_t>(1000 * u(rng));
      f.error.absRef = f.errorSparse.absRef = f.errorQuant.absRef = 1;
      f.error.absDiff = 0.1 * u(rng);
      f.errorSparse.absDiff = 0.07 * u(rng);
      f.errorQuant.absDiff = 0.03 * u(rng);
      row.heads.push_back(f);
    }
    rows.push_back(std::move(row));
  }
  session.showOverviewForTesting(entries, rows);
  app.showView("overview");
  double first = timedFrame(app);
  first += timedFrame(app);  // the tab switches on the frame after the command
  std::vector<double> frames;
  for (int i = 0; i < o.frames; ++i) frames.push_back(timedFrame(app));
  Spread f = spread(frames);
  std::printf("overview: %d entries x %d heads (one %d x %d texture)\n", o.entries, o.heads, o.heads,
              o.entries);
  std::printf("  first two frames: %.2f ms\n", first);
  std::printf("  steady frames (%d): min %.2f  median %.2f  p95 %.2f  max %.2f ms\n", o.frames, f.min,
              f.median, f.p95, f.max);
  app.showView("heads");
}

// The last frame frameUntil drew: the UI thread's split and the wait for its pixels (glFinish).
struct DrawnFrame {
  FrameTimes times;
  std::vector<std::pair<const char*, double>> views;
  double finishMs = 0;
};
DrawnFrame lastDrawn;

// Draws frames until `done()` holds and a drawn frame shows it (or `timeoutS` passes), as the interactive
// loop does: between frames the UI thread sleeps when nothing is left to settle, until the worker posts a
// result, and a frame that schedules a fast run is left undrawn for its result. Returns false on timeout.
template <class F>
bool frameUntil(App& app, F done, double timeoutS) {
  auto t0 = Clock::now();
  while (!done() || app.lastFrameTimes().deferred) {
    app.frame();
    auto f0 = Clock::now();
    glFinish();
    lastDrawn = {app.lastFrameTimes(), app.panels().viewTimes(), ms(f0, Clock::now())};
    if (!done() || app.lastFrameTimes().deferred) app.waitForWork();
    if (ms(t0, Clock::now()) > timeoutS * 1e3) return false;
  }
  return true;
}

// Medians of the frames that put a result on screen: each part of the UI thread's work, each view.
void printFrameSplit(const std::vector<DrawnFrame>& frames) {
  if (frames.empty()) return;
  auto median = [&](auto get) {
    std::vector<double> v;
    for (const auto& f : frames) v.push_back(get(f));
    return spread(v).median;
  };
  std::printf(
      "    the result's frame: apply %.1f  views %.1f  menus/status %.1f  ImGui render %.1f  GL submit %.1f  "
      "glFinish %.1f ms (medians)\n",
      median([](const DrawnFrame& f) { return f.times.pollMs; }),
      median([](const DrawnFrame& f) { return f.times.viewsMs; }),
      median([](const DrawnFrame& f) { return f.times.otherMs; }),
      median([](const DrawnFrame& f) { return f.times.renderMs; }),
      median([](const DrawnFrame& f) { return f.times.submitMs; }),
      median([](const DrawnFrame& f) { return f.finishMs; }));
  std::printf("    views:");
  for (size_t i = 0; i < frames.front().views.size(); ++i) {
    std::printf(" %s %.1f", frames.front().views[i].first,
                median([&](const DrawnFrame& f) { return i < f.views.size() ? f.views[i].second : 0.0; }));
  }
  std::printf(" ms (medians)\n");
  std::printf("    it drew %.0f vertices, %.0f indices in %.0f draw calls (medians)\n",
              median([](const DrawnFrame& f) { return double(f.times.vertices); }),
              median([](const DrawnFrame& f) { return double(f.times.indices); }),
              median([](const DrawnFrame& f) { return double(f.times.drawCalls); }));
}

bool shows(const Session& s, double tau) {
  auto r = s.runs().result();
  if (!r || r->heads.empty()) return false;
  for (const auto& h : r->heads) {
    if (h.params.tau != tau) return false;
  }
  return true;
}

// The engine's side of the runs, medians: its stages on the engine's clock and its host-side split.
void printStageMedians(const std::vector<core::StageTimes>& stages) {
  auto median = [&](double core::StageTimes::*field) {
    std::vector<double> v;
    for (const auto& t : stages) v.push_back(t.*field);
    return spread(v).median;
  };
  if (stages.empty()) return;
  std::printf(
      "    engine stages (%s clock): predict %.1f  quantize %.1f  sparse %.1f  metrics %.1f  total %.1f; "
      "host: queue %.1f  wait %.1f  results %.1f ms (medians)\n",
      stages.front().clock.c_str(), median(&core::StageTimes::predictMs),
      median(&core::StageTimes::quantizeMs), median(&core::StageTimes::sparseMs),
      median(&core::StageTimes::metricsMs), median(&core::StageTimes::totalMs),
      median(&core::StageTimes::hostQueueMs), median(&core::StageTimes::hostWaitMs),
      median(&core::StageTimes::hostResultsMs));
}

// Isolated slider changes: each waits until its result is on screen. Prints the spread.
void isolatedChanges(App& app, Session& session, int changes) {
  core::HeadParams p = session.runs().config().defaults;
  p.theta = -0.1;
  std::vector<double> isolated, complete, engineMs, queued, handoff, shown;
  std::vector<core::StageTimes> stages;
  std::vector<DrawnFrame> resultFrames;
  for (int i = 0; i < changes; ++i) {
    p.tau = 0.90 + 0.003 * (i % 30);
    auto start = Clock::now();
    session.runs().setParams(p, ApplyTarget::AllHeads);
    if (!frameUntil(
            app, [&] { return shows(session, p.tau); }, 600))
      break;
    auto end = Clock::now();
    const LastRun run = session.runs().lastRun();  // the run (or its early result) now on screen
    isolated.push_back(ms(start, end));
    engineMs.push_back(run.wallMs);
    queued.push_back(ms(start, run.started));
    handoff.push_back(ms(run.finished, run.applied));
    shown.push_back(ms(run.applied, end));
    stages.push_back(run.times);
    resultFrames.push_back(lastDrawn);
    // Quantized numerics show the deployed figures first; the error split's sparsity part follows.
    if (!frameUntil(
            app, [&] { return !session.runs().result()->splitPending; }, 600))
      break;
    complete.push_back(ms(start, Clock::now()));
  }
  Spread a = spread(isolated), e = spread(engineMs), c = spread(complete);
  std::printf("  %s: slider change -> views updated, isolated (%zu): median %.1f  p95 %.1f  max %.1f ms\n",
              core::toString(session.runs().config().numerics), isolated.size(), a.median, a.p95, a.max);
  std::printf("    -> error split (sparsity part) on screen too: median %.1f  p95 %.1f  max %.1f ms\n",
              c.median, c.p95, c.max);
  std::printf("    of which the engine run (worker wall time): median %.1f  p95 %.1f ms\n", e.median, e.p95);
  // Where the rest goes: the change waiting for the worker, the finished run waiting for the UI thread,
  // and the frame(s) from applying the result to its pixels.
  std::printf(
      "    before the worker starts it: median %.1f; result waits for the UI thread: median %.1f; "
      "applied -> on screen: median %.1f  p95 %.1f ms\n",
      spread(queued).median, spread(handoff).median, spread(shown).median, spread(shown).p95);
  printStageMedians(stages);
  printFrameSplit(resultFrames);
}

// A drag: the slider moves every frame; each change counts as shown when it or a later one is on screen.
void draggedChanges(App& app, Session& session, int changes) {
  core::HeadParams p = session.runs().config().defaults;
  p.theta = -0.1;
  std::vector<double> drag, issued, taus;
  auto dragStart = Clock::now();
  for (int i = 0; i < changes || drag.size() < issued.size(); ++i) {
    if (i < changes) {
      p.tau = 0.95 - 0.001 * i;
      taus.push_back(p.tau);
      issued.push_back(ms(dragStart, Clock::now()));
      session.runs().setParams(p, ApplyTarget::AllHeads);
    }
    app.frame();
    glFinish();
    double now = ms(dragStart, Clock::now());
    if (now > 600e3) break;
    if (app.lastFrameTimes().deferred) continue;  // nothing new on screen
    for (size_t k = drag.size(); k < taus.size(); ++k) {
      bool later = false;
      for (size_t j = k; j < taus.size(); ++j) later = later || shows(session, taus[j]);
      if (!later) break;
      drag.push_back(now - issued[k]);
    }
  }
  Spread d = spread(drag);
  std::printf("  %s: slider dragged every frame (%zu changes): median %.1f  p95 %.1f  max %.1f ms\n",
              core::toString(session.runs().config().numerics), drag.size(), d.median, d.p95, d.max);
}

// Opens the latency entry and runs it once (the dense reference); false when that run does not finish.
bool openLatencyEntry(App& app, Session& session, const Options& o) {
  core::SynthSpec spec;
  spec.name = "latency";
  spec.headsQ = spec.headsKV = o.heads;
  spec.tokensQ = spec.tokensKV = o.tokens;
  spec.headDim = spec.headDimV = o.dim;
  spec.causal = true;
  spec.segment = std::max<int64_t>(256, o.tokens / 32);
  // What a user starts with: the app's defaults, with the target SpargeAttn runs on this GPU.
  frameUntil(
      app, [&] { return session.engine().ready; }, 120);
  core::RunConfig start = session.runs().config();
  if (o.target != "auto") start.setTarget(core::parseTarget(o.target));
  session.runs().applyConfig(start);
  auto t0 = Clock::now();
  session.openEntryData(std::make_shared<const core::EntryData>(core::makeSyntheticEntry(spec)));
  if (!frameUntil(
          app, [&] { return !session.busy() && session.runs().result(); }, 1800)) {
    std::printf("latency: the first run did not finish\n");
    return false;
  }
  std::printf(
      "latency: %s, entry %d heads x %lld tokens x D %d (causal), %s, first run with the dense "
      "reference %.0f ms\n",
      session.engine().name.c_str(), o.heads, (long long)o.tokens, o.dim,
      session.runs().config().geometry.label().c_str(), ms(t0, Clock::now()));
  return true;
}

void switchToExact(App& app, Session& session) {
  core::RunConfig exact = session.runs().config();
  exact.numerics = core::Numerics::None;
  session.runs().applyConfig(exact);
  frameUntil(
      app, [&] { return !session.busy(); }, 600);
}

// Frames with nothing changing: what the screen costs to draw (and, off-screen, to wait for its pixels).
void steadyFrames(App& app, int frames) {
  std::vector<double> whole, finish;
  for (int i = 0; i < frames; ++i) {
    auto a = Clock::now();
    app.frame();
    auto b = Clock::now();
    glFinish();
    whole.push_back(ms(a, Clock::now()));
    finish.push_back(ms(b, Clock::now()));
  }
  Spread w = spread(whole);
  std::printf("    steady frames (%d): median %.1f  min %.1f ms, of which glFinish median %.1f ms\n", frames,
              w.median, w.min, spread(finish).median);
}

void benchLatency(App& app, Session& session, const Options& o) {
  if (!openLatencyEntry(app, session, o)) return;
  isolatedChanges(app, session, o.changes);
  draggedChanges(app, session, o.changes);
  // Exact numerics: one sparse pass a change (quantized numerics add the exact pass behind l1_sparse).
  switchToExact(app, session);
  isolatedChanges(app, session, o.changes);
  steadyFrames(app, o.changes);
  if (!o.screenshot.empty()) writeFramebufferPng(o.screenshot, 1920, 1080);
}

// The slider moves again with the curves view's methods overlay in front (the head detail's panel): every
// block predictor's error-sparsity curves of head 0, swept first on the worker's second engine.
void benchLatencyMethods(App& app, Session& session, const Options& o) {
  if (!session.runs().result() && !openLatencyEntry(app, session, o)) return;
  app.showView("curves");
  auto t0 = Clock::now();
  session.orderCurves().sweep(o.overlayPoints, OverlayKind::Methods);
  if (!frameUntil(
          app, [&] { return !session.orderCurves().running() && !session.busy(); }, 1800)) {
    std::printf("latency-methods: the overlay's sweep did not finish\n");
    return;
  }
  auto d = session.orderCurves().data();
  std::printf(
      "latency-methods: the curves view's methods overlay in front, %zu series, %zu/%zu points, swept in "
      "%.0f ms\n",
      d ? d->series.size() : 0, d ? d->done : 0, d ? d->total : 0, ms(t0, Clock::now()));
  isolatedChanges(app, session, o.changes);
  switchToExact(app, session);
  isolatedChanges(app, session, o.changes);
  steadyFrames(app, o.changes);
  if (!o.screenshot.empty()) writeFramebufferPng(o.screenshot + ".methods.png", 1920, 1080);
  app.showView("detail");
}
}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  auto platform = makeEglPlatform();
  platform->init(PlatformConfig{1920, 1080, false, "bench"});
  std::printf("renderer: %s, window 1920x1080\n", platform->describe().c_str());
  platform->overrideMouse = true;
  {
    core::EngineChoice choice = core::parseEngineChoice(o.engine);
    Session session([choice] { return engines::makeEngine(choice, 0); });
    session.runs().applyConfig(defaultAppConfig());
    session.followDeviceTarget(o.target == "auto");
    AppSettings settings;
    App app(session, settings, *platform, true);
    app.setDeferFrames(true);  // as the interactive app draws
    app.setupStyleAndFonts(1.0f);
    app.ui().thumbSize = 96;
    if (o.grid) benchGrid(app, session, o);
    if (o.overview) benchOverview(app, session, o);
    if (o.latency) benchLatency(app, session, o);
    if (o.latencyMethods) benchLatencyMethods(app, session, o);
  }
  platform->shutdown();
  ImGui::DestroyContext();
  return 0;
}
