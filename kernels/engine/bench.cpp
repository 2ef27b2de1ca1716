// Benchmark driver on random device data: times the whole call (Stage 1 + quantization + attention) per
// top-k, its parts, our dense path and cuDNN's fused attention with CUDA events. Never touches the host
// reference.
#include "sparge/kernels/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "call/whole_call.h"
#include "common/head_dim.h"
#include "engine/cudnn_sdpa.h"
#include "engine/device_stages.h"
#include "predictors/predictors.h"
#include "sparge/core/error.h"
#include "sparge/profiler/event_timer.h"
#include "sparge/profiler/warm_up.h"

namespace sparge::cuda {

std::string benchDeviceName() {
  return deviceNameOrThrow();
}

core::Geometry benchDefaultGeometry() {
  return deviceComputeCapability() == 90 ? core::kGeometry64x128 : core::kGeometry128x64;
}

namespace {

// Lets the GPU's clocks recover from the previous measurement (BenchCase::pauseMs).
void settle(const BenchCase& c) {
  if (c.pauseMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(c.pauseMs));
}

TimeStats timeIt(const std::function<void()>& fn, const BenchCase& c) {
  // BenchCase::warmup runs back to back, then each one waited for, so that the clock counts GPU time.
  prof::warmUp(c.warmup, c.warmupMs, [&](int i) {
    fn();
    if (i + 1 >= c.warmup) check(cudaDeviceSynchronize(), "bench warm-up");
  });
  check(cudaDeviceSynchronize(), "bench warm-up");
  const int repeat = c.repeat;
  std::vector<double> t;
  prof::EventTimer ev;
  for (int r = 0; r < std::max(1, repeat); ++r) {
    ev.start();
    fn();
    ev.stop();
    t.push_back(ev.elapsedMs());
  }
  std::sort(t.begin(), t.end());
  TimeStats s;
  s.minMs = t.front();
  s.maxMs = t.back();
  const size_t n = t.size();
  s.medianMs = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  return s;
}

// Random Q/K/V and every buffer one call needs, for one benchmark case.
struct BenchData {
  Problem p;
  DeviceBuffer q, k, v, o, skip, empty, params, heads;
  DeviceQkv qkv;
  KeyMean keyMean;
  Stage1Stats stats;
  DeviceSelection sel;
  DeviceQuant quant;
  const QuantOperands* ops = nullptr;
  double scale = 0;
  bool smoothK = true;
  KernelSwitches switches;
  // The deployed whole call as the C API runs it (Stage 1 fused with Q/K quantization, one workspace).
  std::unique_ptr<WholeCall> call;
  DeviceBuffer callWorkspace;
  std::vector<HeadParamsDev> hostParams;

  explicit BenchData(const BenchCase& c);
  size_t bh() const { return (size_t)p.B * p.Hq; }
  void setTopk(const BenchCase& c, double topk);
  void stage1(bool fresh) {
    if (fresh) keyMean.refresh();
    if (fresh) stats.compute(qkv, p, keyMean.get(qkv, p, smoothK, 0), 0);
    sel.select(qkv, p, stats, params.as<HeadParamsDev>(), ForcedOn{}, switches, 0);
  }
  void quantizeOperands(core::Numerics n) {
    ops = n == core::Numerics::None ? nullptr : &quant.run(qkv, p, n, keyMean.get(qkv, p, smoothK, 0), 0);
  }
  void wholeCall(core::Numerics n) {
    if (!call || call->shape().numerics != n) {
      CallShape shape;
      shape.B = p.B, shape.Hq = p.Hq, shape.Hkv = p.Hkv, shape.Nq = p.Nq, shape.Nkv = p.Nkv, shape.D = p.D;
      shape.et = qkv.et;
      shape.geometry = core::Geometry{p.BQ, p.BK};
      shape.causal = p.causal;
      shape.numerics = n;
      shape.scale = scale;
      shape.smoothK = smoothK;
      shape.switches = switches;
      shape.q = shape.o = {int64_t(p.Hq) * p.Nq * p.D, int64_t(p.Nq) * p.D, p.D};
      shape.k = shape.v = {int64_t(p.Hkv) * p.Nkv * p.D, int64_t(p.Nkv) * p.D, p.D};
      call = std::make_unique<WholeCall>(shape);
      callWorkspace.reserve(call->workspaceBytes(), "whole-call workspace");
    }
    CallArgs a;
    a.q = qkv.q, a.k = qkv.k, a.v = qkv.v, a.o = o.get();
    a.params = hostParams.data();
    a.workspace = callWorkspace.get();
    call->run(a);
  }
  void attention(core::Numerics n, bool dense) {
    const AttnArgs a = makeAttnArgs(qkv, scale, sel, params.as<HeadParamsDev>(), o.get(), skip.as<uint8_t>(),
                                    empty.as<int>(), n, ops, switches);
    launchAttention(qkv.et, p, a, dense, 0);
  }
};

BenchData::BenchData(const BenchCase& c) {
  const int H = (int)c.heads, N = (int)c.tokens, D = (int)c.headDim;
  p = makeProblem((int)c.batch, H, H, N, N, D, c.geometry, c.causal, core::Window{});
  p.nHeads = H;
  switches = KernelSwitches::fromEnvironment();
  switches.family = c.mmaSyncOnly ? AttnFamily::Sm80 : AttnFamily::Auto;  // the case decides the family
  scale = 1.0 / std::sqrt((double)D);
  qkv.et = c.dtype == core::DType::BFloat16 ? ElemType::BF16 : ElemType::F16;
  const size_t elems = bh() * N * D;
  q.reserve(elems * 2, "bench Q");
  k.reserve(elems * 2, "bench K");
  v.reserve(elems * 2, "bench V");
  o.reserve(elems * 2, "bench O");
  skip.reserve(bh() * p.nq * p.nk, "bench skip map");
  empty.reserve(bh() * sizeof(int), "bench empty rows");
  params.reserve(sizeof(HeadParamsDev) * H, "bench params");
  std::vector<int> hl(H);
  for (int h = 0; h < H; ++h) hl[h] = h;
  uploadHeads(heads, hl);
  p.heads = heads.as<int>();
  launchRandomFill(qkv.et, q.get(), (int64_t)elems, 1, 1.f, 0);
  launchRandomFill(qkv.et, k.get(), (int64_t)elems, 2, 1.f, 0);
  launchRandomFill(qkv.et, v.get(), (int64_t)elems, 3, 1.f, 0);
  qkv.q = q.get();
  qkv.k = k.get();
  qkv.v = v.get();
  const core::BlockValidity v = core::computeBlockValidity(c.geometry, N, N, c.causal);
  sel.setBlocks(blockFlags(v, c.geometry, N, N, c.causal, core::Window{}), c.geometry);
  check(cudaDeviceSynchronize(), "random fill");
}

void BenchData::setTopk(const BenchCase& c, double topk) {
  std::vector<HeadParamsDev> hp(p.Hq);
  for (auto& x : hp) {
    x.theta = c.theta;
    x.mode = 1;
    x.topk = (float)topk;
    x.lambda = (float)c.lambda;
  }
  check(cudaMemcpy(params.get(), hp.data(), sizeof(HeadParamsDev) * hp.size(), cudaMemcpyHostToDevice),
        "params");
  hostParams = hp;
}

// Block counts of the selection just made, and the PV skips of one attention over it.
void countBlocks(BenchData& d, const BenchCase& c, BenchSparse& sp) {
  std::vector<int32_t> counts;
  download(counts, d.sel.validCount, d.bh() * d.p.nq, "counts");
  check(cudaMemset(d.skip.get(), 0, d.bh() * d.p.nq * d.p.nk), "memset");
  d.attention(c.numerics, false);
  std::vector<uint8_t> skipped;
  download(skipped, d.skip, d.bh() * d.p.nq * d.p.nk, "skip map");
  for (int32_t x : counts) sp.selectedBlocks += x;
  for (uint8_t x : skipped) sp.skippedPvBlocks += x;
  const core::BlockValidity v = core::computeBlockValidity(c.geometry, c.tokens, c.tokens, c.causal);
  int64_t validPerHead = 0;
  for (uint8_t x : v.valid) validPerHead += x;
  sp.validBlocks = validPerHead * (int64_t)d.bh();
}

// Stage 1 of method m, fresh (statistics computed again) and with its statistics cached, and its density.
BenchMethod timeMethod(BenchData& d, const BenchCase& c, core::Method m) {
  predictors::MethodStage1 stage1;
  predictors::MethodRun r;
  r.method = m;
  r.qkv = d.qkv;
  r.problem = d.p;
  r.scale = d.scale;
  for (int h = 0; h < d.p.Hq; ++h) r.heads.push_back(h);
  const std::vector<core::HeadParams> params(size_t(d.p.Hq), c.methodParams);
  r.params = &params;
  r.paramsDev = d.params.as<HeadParamsDev>();
  BenchMethod out;
  out.method = m;
  out.stage1 = timeIt(
      [&] {
        stage1.invalidateStats();
        stage1.run(r, d.sel);
      },
      c);
  out.select = timeIt([&] { stage1.run(r, d.sel); }, c);
  std::vector<int32_t> counts;
  download(counts, d.sel.validCount, d.bh() * d.p.nq, "counts");
  int64_t selected = 0, valid = 0;
  for (int32_t x : counts) selected += x;
  for (uint8_t x : core::computeBlockValidity(c.geometry, c.tokens, c.tokens, c.causal).valid) valid += x;
  out.density = valid ? double(selected) / double(valid * (int64_t)d.bh()) : 0;
  return out;
}

void timeCudnn(BenchData& d, const BenchCase& c, BenchResult& res) {
  try {
    SdpaShape shape{d.qkv.et, d.p.B, d.p.Hq,   d.p.Hkv,        d.p.Nq,
                    d.p.Nkv,  d.p.D, c.causal, core::Window{}, d.scale};
    CudnnSdpa sdpa(shape);
    res.cudnnLabel = sdpa.label();
    res.cudnn = timeIt([&] { sdpa.run(d.q.get(), d.k.get(), d.v.get(), d.o.get(), 0); }, c);
    res.cudnnTimed = true;
  } catch (const Error& e) {
    res.cudnnLabel = "cuDNN not timed: " + e.problem();
  }
}

}  // namespace

BenchResult runBench(const BenchCase& c) {
  BenchResult res;
  res.config = c;
  res.device = deviceNameOrThrow();
  requireHeadDim(c.headDim, "bench");
  BenchData d(c);
  // Stage 2 of D 256 (and of 128x64 tiles) runs the mma.sync family even on Hopper: say which one is timed.
  res.attentionKernel = attentionSm90Selected(d.p, c.numerics, d.switches.family) ? "sm90" : "sm80";

  d.setTopk(c, c.topks.empty() ? 0.5 : c.topks.front());
  settle(c);
  res.stage1 = timeIt([&] { d.stage1(true); }, c);
  res.stage1Select = timeIt([&] { d.stage1(false); }, c);
  res.quantize = timeIt([&] { d.quantizeOperands(c.numerics); }, c);
  res.dense = timeIt(
      [&] {
        d.quantizeOperands(c.numerics);
        d.attention(c.numerics, true);
      },
      c);
  if (c.cudnn) {
    settle(c);
    timeCudnn(d, c, res);
  }
  for (core::Method m : c.methods) {
    settle(c);
    res.methods.push_back(timeMethod(d, c, m));
  }

  for (double tk : c.topks) {
    d.setTopk(c, tk);
    d.stage1(true);
    d.quantizeOperands(c.numerics);
    BenchSparse sp;
    sp.topk = tk;
    settle(c);
    sp.stage2 = timeIt([&] { d.attention(c.numerics, false); }, c);
    sp.call = timeIt([&] { d.wholeCall(c.numerics); }, c);
    countBlocks(d, c, sp);
    res.sparse.push_back(sp);
  }
  const double flops = 4.0 * c.batch * c.heads * (double)c.tokens * (double)c.tokens * (double)c.headDim;
  res.denseFlops = c.causal ? flops / 2 : flops;
  res.blockFlops = 4.0 * c.geometry.blockQ * c.geometry.blockK * (double)c.headDim;
  return res;
}

}  // namespace sparge::cuda
