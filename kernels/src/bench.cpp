// Benchmark driver on random device data: times Stage 1 (fresh and selection-only), Stage 2 per top-k
// and the dense path with CUDA events. Never touches the host reference.
#include "sparge/kernels/bench.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "cuda_util.h"
#include "launch.h"
#include "sparge/core/error.h"
#include "sparge/core/stage1.h"

namespace sparge::cuda {

std::string benchDeviceName() {
  return deviceNameOrThrow();
}

core::Geometry benchDefaultGeometry() {
  return deviceComputeCapability() == 90 ? core::kGeometry64x128 : core::kGeometry128x64;
}

namespace {
TimeStats timeIt(const std::function<void()>& fn, int warmup, int repeat) {
  for (int w = 0; w < warmup; ++w) fn();
  check(cudaDeviceSynchronize(), "bench warm-up");
  std::vector<double> t;
  EventTimer ev;
  for (int r = 0; r < std::max(1, repeat); ++r) {
    ev.start();
    fn();
    ev.stop();
    t.push_back(ev.ms());
  }
  std::sort(t.begin(), t.end());
  TimeStats s;
  s.minMs = t.front();
  s.maxMs = t.back();
  size_t n = t.size();
  s.medianMs = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  return s;
}
}  // namespace

BenchResult runBench(const BenchCase& c) {
  BenchResult res;
  res.config = c;
  res.device = deviceNameOrThrow();
  if (c.headDim != 64 && c.headDim != 128) throw Error("bench", "head dim must be 64 or 128");
  const ElemType et = c.dtype == core::DType::BFloat16 ? ElemType::BF16 : ElemType::F16;
  const core::Geometry g = c.geometry;

  Problem p;
  p.B = (int)c.batch;
  p.Hq = p.Hkv = (int)c.heads;
  p.Nq = p.Nkv = (int)c.tokens;
  p.D = (int)c.headDim;
  p.BQ = g.blockQ;
  p.BK = g.blockK;
  p.nq = (int)core::ceilDiv(c.tokens, g.blockQ);
  p.nk = (int)core::ceilDiv(c.tokens, g.blockK);
  p.causal = c.causal;
  p.nHeads = p.Hq;
  const size_t BH = (size_t)p.B * p.Hq;
  const size_t elems = BH * p.Nq * p.D;
  const size_t grid = (size_t)p.nq * p.nk;

  DeviceBuffer q, k, v, o, km, kmScratch, pq, pk, sq, sk, scores, mask, reasons, prob, lut, valid, skip,
      empty, params, heads;
  q.reserve(elems * 2, "bench Q");
  k.reserve(elems * 2, "bench K");
  v.reserve(elems * 2, "bench V");
  o.reserve(elems * 2, "bench O");
  km.reserve(BH * p.D * 2, "bench K mean");
  kmScratch.reserve(BH * p.D * sizeof(double), "bench scratch");
  pq.reserve(BH * p.nq * p.D * 2, "bench pooled Q");
  pk.reserve(BH * p.nk * p.D * 2, "bench pooled K");
  sq.reserve(BH * p.nq * 4, "bench sim Q");
  sk.reserve(BH * p.nk * 4, "bench sim K");
  scores.reserve(BH * grid * 2, "bench scores");
  mask.reserve(BH * grid, "bench mask");
  reasons.reserve(BH * grid, "bench reasons");
  prob.reserve(BH * grid * 4, "bench prob");
  lut.reserve(BH * grid * 4, "bench LUT");
  valid.reserve(BH * p.nq * 4, "bench counts");
  skip.reserve(BH * grid, "bench skip map");
  empty.reserve(BH * sizeof(int), "bench empty rows");
  params.reserve(sizeof(HeadParamsDev) * p.Hq, "bench params");
  heads.reserve(sizeof(int) * p.Hq, "bench heads");
  std::vector<int> hl(p.Hq);
  for (int h = 0; h < p.Hq; ++h) hl[h] = h;
  check(cudaMemcpy(heads.get(), hl.data(), sizeof(int) * hl.size(), cudaMemcpyHostToDevice), "heads");
  p.heads = heads.as<int>();

  launchRandomFill(et, q.get(), (int64_t)elems, 1, 1.f, 0);
  launchRandomFill(et, k.get(), (int64_t)elems, 2, 1.f, 0);
  launchRandomFill(et, v.get(), (int64_t)elems, 3, 1.f, 0);
  check(cudaDeviceSynchronize(), "random fill");

  auto setParams = [&](double topk) {
    std::vector<HeadParamsDev> hp(p.Hq);
    for (auto& x : hp) {
      x.theta = c.theta;
      x.mode = 1;
      x.topk = (float)topk;
      x.lambda = (float)c.lambda;
    }
    check(cudaMemcpy(params.get(), hp.data(), sizeof(HeadParamsDev) * hp.size(), cudaMemcpyHostToDevice),
          "params");
  };
  auto select = [&] {
    launchSelect(et, p, scores.get(), sq.as<float>(), sk.as<float>(), params.as<HeadParamsDev>(), false,
                 mask.as<uint8_t>(), reasons.as<uint8_t>(), prob.as<float>(), lut.as<int32_t>(),
                 valid.as<int32_t>(), 0);
  };
  auto stage1 = [&] {
    launchKeyMean(et, k.get(), (int)BH, p.Nkv, p.D, kmScratch.as<double>(), km.get(), 0);
    launchBlockStats(et, q.get(), (int)BH, p.Nq, p.D, p.BQ, nullptr, pq.get(), sq.as<float>(), 0);
    launchBlockStats(et, k.get(), (int)BH, p.Nkv, p.D, p.BK, km.get(), pk.get(), sk.as<float>(), 0);
    launchScores(et, p, pq.get(), pk.get(), scores.get(), 0);
    select();
  };
  AttnArgs a;
  a.q = q.get();
  a.k = k.get();
  a.v = v.get();
  a.o = o.get();
  a.scaleLog2 = (float)(1.0 / std::sqrt((double)p.D) * 1.4426950408889634);
  a.lut = lut.as<int32_t>();
  a.validCount = valid.as<int32_t>();
  a.params = params.as<HeadParamsDev>();
  a.pvSkipped = skip.as<uint8_t>();
  a.emptyRows = empty.as<int>();

  setParams(c.topks.empty() ? 0.5 : c.topks.front());
  res.stage1 = timeIt(stage1, c.warmup, c.repeat);
  res.stage1Select = timeIt(select, c.warmup, c.repeat);
  res.dense = timeIt([&] { launchAttention(et, p, a, true, 0); }, c.warmup, c.repeat);

  int64_t validPerHead = 0;
  for (int i = 0; i < p.nq; ++i)
    for (int j = 0; j < p.nk; ++j) validPerHead += core::blockValid(i, j, g, p.Nq, p.Nkv, p.causal);

  for (double tk : c.topks) {
    setParams(tk);
    stage1();
    BenchSparse sp;
    sp.topk = tk;
    sp.stage2 = timeIt([&] { launchAttention(et, p, a, false, 0); }, c.warmup, c.repeat);
    std::vector<int32_t> counts(BH * p.nq);
    check(cudaMemcpy(counts.data(), valid.get(), counts.size() * 4, cudaMemcpyDeviceToHost), "counts");
    check(cudaMemset(skip.get(), 0, BH * grid), "memset");
    launchAttention(et, p, a, false, 0);
    std::vector<uint8_t> sk8(BH * grid);
    check(cudaMemcpy(sk8.data(), skip.get(), sk8.size(), cudaMemcpyDeviceToHost), "skip map");
    for (int32_t x : counts) sp.selectedBlocks += x;
    for (uint8_t x : sk8) sp.skippedPvBlocks += x;
    sp.validBlocks = validPerHead * (int64_t)BH;
    res.sparse.push_back(sp);
  }
  double flops = 4.0 * p.B * p.Hq * (double)p.Nq * p.Nkv * p.D;
  res.denseFlops = c.causal ? flops / 2 : flops;
  res.blockFlops = 4.0 * g.blockQ * g.blockK * p.D;
  return res;
}

}  // namespace sparge::cuda
