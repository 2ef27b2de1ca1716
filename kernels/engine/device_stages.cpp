// Stage 1, quantization and attention arguments on device buffers (shared by the engine and the benchmark).
#include "engine/device_stages.h"

#include <cmath>

namespace sparge::cuda {

Problem makeProblem(int B, int Hq, int Hkv, int Nq, int Nkv, int D, const core::Geometry& g, bool causal,
                    const core::Window& window) {
  Problem p;
  p.B = B;
  p.Hq = Hq;
  p.Hkv = Hkv;
  p.Nq = Nq;
  p.Nkv = Nkv;
  p.D = D;
  p.BQ = g.blockQ;
  p.BK = g.blockK;
  p.nq = (int)core::ceilDiv(Nq, g.blockQ);
  p.nk = (int)core::ceilDiv(Nkv, g.blockK);
  p.causal = causal;
  p.window = window;
  return p;
}

const void* KeyMean::get(const DeviceQkv& x, const Problem& p, bool smoothK, cudaStream_t s) {
  const size_t BHk = (size_t)p.B * p.Hkv;
  if (!smoothK) {
    if (!zerosDone_) {
      zeros_.reserve(BHk * p.D * 2, "zero K mean");
      check(cudaMemsetAsync(zeros_.get(), 0, BHk * p.D * 2, s), "memset");
      zerosDone_ = true;
    }
    return zeros_.get();
  }
  if (!meanDone_) {
    mean_.reserve(BHk * p.D * 2, "K mean");
    scratch_.reserve(BHk * p.D * sizeof(double), "K mean scratch");
    launchKeyMean(x.et, x.k, (int)BHk, p.Nkv, p.D, scratch_.as<double>(), mean_.get(), s);
    meanDone_ = true;
  }
  return mean_.get();
}

void Stage1Stats::compute(const DeviceQkv& x, const Problem& p, const void* km, cudaStream_t s) {
  const size_t BH = (size_t)p.B * p.Hq, BHk = (size_t)p.B * p.Hkv;
  pooledQ.reserve(BH * p.nq * p.D * 2, "pooled Q");
  pooledK.reserve(BHk * p.nk * p.D * 2, "pooled K");
  simQ.reserve(BH * p.nq * sizeof(float), "self-similarity Q");
  simK.reserve(BHk * p.nk * sizeof(float), "self-similarity K");
  scores.reserve(BH * p.nq * p.nk * 2, "pooled scores");
  launchBlockStats(x.et, x.q, (int)BH, p.Nq, p.D, p.BQ, nullptr, pooledQ.get(), simQ.as<float>(), s);
  launchBlockStats(x.et, x.k, (int)BHk, p.Nkv, p.D, p.BK, km, pooledK.get(), simK.as<float>(), s);
  launchScores(x.et, p, pooledQ.get(), pooledK.get(), scores.get(), s);
}

std::vector<uint8_t> blockFlags(const core::BlockValidity& validity, const core::Geometry& g, int64_t nQ,
                                int64_t nKv, bool causal, const core::Window& window) {
  std::vector<uint8_t> flags(validity.valid.size());
  for (int i = 0; i < validity.nq; ++i)
    for (int j = 0; j < validity.nk; ++j) {
      const size_t x = (size_t)i * validity.nk + j;
      flags[x] = (validity.valid[x] ? kBlockValid : 0) |
                 (core::blockOnDiagonal(i, j, g, nQ, nKv, causal, window) ? kBlockOnDiagonal : 0);
    }
  return flags;
}

void DeviceSelection::setBlocks(const std::vector<uint8_t>& flags, const core::Geometry& g) {
  if (blocksQ_ == g.blockQ && blocksK_ == g.blockK && blocksSize_ == flags.size()) return;
  blocks_.reserve(flags.size(), "block flags");
  check(cudaMemcpy(blocks_.get(), flags.data(), flags.size(), cudaMemcpyHostToDevice), "upload block flags");
  blocksQ_ = g.blockQ;
  blocksK_ = g.blockK;
  blocksSize_ = flags.size();
}

void DeviceSelection::reserveOutputs(const Problem& p) {
  const size_t BH = (size_t)p.B * p.Hq, grid = (size_t)p.nq * p.nk;
  mask.reserve(BH * grid, "mask");
  reasons.reserve(BH * grid, "reasons");
  prob.reserve(BH * grid * sizeof(float), "pooled probabilities");
  lut.reserve(BH * grid * sizeof(int32_t), "LUT");
  validCount.reserve(BH * p.nq * sizeof(int32_t), "LUT counts");
}

void DeviceSelection::select(const DeviceQkv& x, const Problem& p, const Stage1Stats& stats,
                             const HeadParamsDev* params, ForcedOn forced, const KernelSwitches& switches,
                             cudaStream_t s) {
  reserveOutputs(p);
  SelectArgs a;
  a.scores = stats.scores.get();
  a.selfSimQ = stats.simQ.as<float>();
  a.selfSimK = stats.simK.as<float>();
  a.blocks = blocks_.as<uint8_t>();
  a.params = params;
  a.sink = forced.sink;
  a.diagonal = forced.diagonal;
  a.mask = mask.as<uint8_t>();
  a.reasons = reasons.as<uint8_t>();
  a.prob = prob.as<float>();
  a.lut = lut.as<int32_t>();
  a.validCount = validCount.as<int32_t>();
  a.ctaPerRow = switches.selectCtaPerRow;
  launchSelect(x.et, p, a, s);
}

const QuantOperands& DeviceQuant::run(const DeviceQkv& x, const Problem& p, core::Numerics n, const void* km,
                                      cudaStream_t s) {
  workspace_.reserve(quantWorkspaceBytes(p, n), "quantized operands");
  ops_ = launchQuantize(x.et, p, n, x.q, x.k, km, x.v, workspace_.get(), s);
  return ops_;
}

AttnArgs makeAttnArgs(const DeviceQkv& x, double scale, const DeviceSelection& sel,
                      const HeadParamsDev* params, void* o, uint8_t* pvSkipped, int* emptyRows,
                      core::Numerics numerics, const QuantOperands* quant, const KernelSwitches& switches) {
  AttnArgs a;
  a.family = switches.family;
  a.sm90SplitBelow = switches.sm90SplitBelow;
  a.q = x.q;
  a.k = x.k;
  a.v = x.v;
  a.o = o;
  a.scaleLog2 = (float)(scale * 1.4426950408889634);
  a.lut = sel.lut.as<int32_t>();
  a.validCount = sel.validCount.as<int32_t>();
  a.params = params;
  a.pvSkipped = pvSkipped;
  a.emptyRows = emptyRows;
  if (quant) {
    a.numerics = numerics;
    a.quant = *quant;
  }
  return a;
}

HeadParamsDev toDeviceParams(const core::HeadParams& x) {
  HeadParamsDev d;
  d.theta = x.theta;
  d.mode = x.mode == core::SelectMode::TopK ? 1 : 0;
  d.tau = (float)x.tau;
  d.topk = (float)x.topk;
  d.lambda = x.dense ? INFINITY : (float)x.lambda;
  d.dense = x.dense ? 1 : 0;
  return d;
}

void uploadHeads(DeviceBuffer& dst, const std::vector<int>& heads) {
  dst.reserve(sizeof(int) * heads.size(), "head list");
  check(cudaMemcpy(dst.get(), heads.data(), sizeof(int) * heads.size(), cudaMemcpyHostToDevice), "heads");
}

}  // namespace sparge::cuda
