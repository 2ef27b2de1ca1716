// CudaEngine: uploads an entry once, caches θ-independent Stage-1 statistics per (geometry, smooth_k)
// and the fp32 reference per head, and runs selection + Stage 2 + error reduction per call.
#include "sparge/kernels/cuda_engine.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "cuda_util.h"
#include "launch.h"
#include "sparge/core/error.h"
#include "sparge/core/run_request.h"
#include "sparge/core/stage1.h"

namespace sparge::cuda {

namespace {
constexpr const char* kWhere = "cuda engine";

void throwIfCancelled(const core::RunOptions& o) {
  if (o.cancel && o.cancel->load()) throw core::Cancelled();
}

std::vector<uint16_t> toHalfBits(const std::vector<float>& x, ElemType t) {
  std::vector<uint16_t> out(x.size());
  if (t == ElemType::F16) {
    for (size_t i = 0; i < x.size(); ++i) {
      __half h = __float2half_rn(x[i]);
      out[i] = *reinterpret_cast<uint16_t*>(&h);
    }
  } else {
    for (size_t i = 0; i < x.size(); ++i) {
      __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
      out[i] = *reinterpret_cast<uint16_t*>(&h);
    }
  }
  return out;
}

float halfBitsToFloat(uint16_t b, ElemType t) {
  if (t == ElemType::F16) {
    __half h = *reinterpret_cast<__half*>(&b);
    return __half2float(h);
  }
  __nv_bfloat16 h = *reinterpret_cast<__nv_bfloat16*>(&b);
  return __bfloat162float(h);
}

bool anyNonFinite(const float* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return true;
  return false;
}

template <typename T>
void download(std::vector<T>& host, const DeviceBuffer& dev, size_t count, const char* what) {
  host.resize(count);
  if (count) check(cudaMemcpy(host.data(), dev.get(), count * sizeof(T), cudaMemcpyDeviceToHost), what);
}
}  // namespace

bool deviceUsable(std::string* why) {
  try {
    deviceNameOrThrow();
    return true;
  } catch (const Error& e) {
    if (why) *why = e.problem();
    return false;
  }
}

struct CudaEngine::State {
  ElemType et = ElemType::F16;
  int B = 0, Hq = 0, Hkv = 0, Nq = 0, Nkv = 0, D = 0;
  DeviceBuffer q, k, v;
  bool uploaded = false;
  std::vector<uint8_t> inputNonFinite;  // [B*Hq]: NaN/Inf in Q of this head or K/V of its KV head

  struct Stats {
    DeviceBuffer pooledQ, pooledK, simQ, simK, scores;
    std::vector<float> hostSimQ, hostSimK;  // [B*Hq*nq], [B*Hkv*nk]
  };
  std::map<std::tuple<int, int, bool>, std::unique_ptr<Stats>> stats;
  DeviceBuffer km, kmScratch;

  DeviceBuffer oref, mass64;
  std::vector<uint8_t> refDone;  // per query head (all batch items)

  DeviceBuffer heads, params, mask, reasons, prob, lut, valid, o, pvSkipped, emptyRows, errSums;

  std::map<std::tuple<int, int>, core::BlockValidity> validity;  // per geometry (the entry fixes causal)
};

CudaEngine::CudaEngine() : deviceName_(deviceNameOrThrow()), state_(std::make_unique<State>()) {}
CudaEngine::~CudaEngine() = default;

std::string CudaEngine::name() const {
  return "cuda: " + deviceName_;
}

void CudaEngine::setEntry(std::shared_ptr<const core::EntryData> entry) {
  entry_ = std::move(entry);
  state_ = std::make_unique<State>();  // frees every device buffer of the previous entry
}

core::EntryResult CudaEngine::run(const core::RunConfig& config, const core::RunOptions& options) {
  using namespace core;
  if (!entry_) throw Error(kWhere, "no entry selected");
  const EntryInfo& info = entry_->info;
  State& st = *state_;
  auto wallStart = std::chrono::steady_clock::now();

  if (info.headDim != 64 && info.headDim != 128)
    throw Error(kWhere, "head dim " + std::to_string(info.headDim) +
                            " is not supported by the CUDA kernels (64 or 128); use --engine cpu");
  if (info.headDimV != info.headDim)
    throw Error(kWhere, "Dv = " + std::to_string(info.headDimV) +
                            " differs from D = " + std::to_string(info.headDim) +
                            "; the CUDA kernels need Dv == D (use --engine cpu)");
  if (info.headsKV <= 0 || info.headsQ % info.headsKV != 0)
    throw Error(kWhere, "query heads must be a multiple of KV heads");
  const int64_t maxInt = std::numeric_limits<int>::max() / 256;
  if (info.tokensQ > maxInt || info.tokensKV > maxInt)
    throw Error(kWhere, "sequence too long for the CUDA engine");
  const Geometry g = config.geometry;
  if (!(g == kGeometry128x64 || g == kGeometry64x128))
    throw Error(kWhere, "geometry " + g.label() + " is not supported (128x64 or 64x128)");

  if (!st.uploaded) {
    st.et = info.dtype == DType::BFloat16 ? ElemType::BF16 : ElemType::F16;
    st.B = (int)info.batch;
    st.Hq = (int)info.headsQ;
    st.Hkv = (int)info.headsKV;
    st.Nq = (int)info.tokensQ;
    st.Nkv = (int)info.tokensKV;
    st.D = (int)info.headDim;
    auto up = [&](DeviceBuffer& d, const std::vector<float>& h, const char* what) {
      auto bits = toHalfBits(h, st.et);
      d.reserve(bits.size() * 2, what);
      check(cudaMemcpy(d.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice), what);
    };
    up(st.q, entry_->q, "upload Q");
    up(st.k, entry_->k, "upload K");
    up(st.v, entry_->v, "upload V");
    st.inputNonFinite.assign((size_t)st.B * st.Hq, 0);
    for (int b = 0; b < st.B; ++b)
      for (int h = 0; h < st.Hq; ++h) {
        int hk = (int)info.kvHeadOf(h);
        bool bad = anyNonFinite(entry_->qHead(b, h), (size_t)st.Nq * st.D) ||
                   anyNonFinite(entry_->kHead(b, hk), (size_t)st.Nkv * st.D) ||
                   anyNonFinite(entry_->vHead(b, hk), (size_t)st.Nkv * st.D);
        st.inputNonFinite[(size_t)b * st.Hq + h] = bad;
      }
    st.refDone.assign(st.Hq, 0);
    st.uploaded = true;
  }

  std::vector<int> heads;
  for (int64_t h : resolveRunHeads(info, config, options.heads)) heads.push_back((int)h);

  Problem p;
  p.B = st.B;
  p.Hq = st.Hq;
  p.Hkv = st.Hkv;
  p.Nq = st.Nq;
  p.Nkv = st.Nkv;
  p.D = st.D;
  p.BQ = g.blockQ;
  p.BK = g.blockK;
  p.nq = (int)ceilDiv(st.Nq, g.blockQ);
  p.nk = (int)ceilDiv(st.Nkv, g.blockK);
  p.causal = info.causal;
  p.nHeads = (int)heads.size();
  const size_t BH = (size_t)st.B * st.Hq;
  const size_t grid = (size_t)p.nq * p.nk;

  std::vector<HeadParamsDev> hp(st.Hq);
  for (int h = 0; h < st.Hq; ++h) {
    const HeadParams& x = config.forHead(h);
    validate(x, "head " + std::to_string(h));
    hp[h].theta = x.theta;
    hp[h].mode = x.mode == SelectMode::TopK ? 1 : 0;
    hp[h].tau = (float)x.tau;
    hp[h].topk = (float)x.topk;
    hp[h].lambda = x.dense ? INFINITY : (float)x.lambda;
    hp[h].dense = x.dense ? 1 : 0;
  }
  st.heads.reserve(sizeof(int) * heads.size(), "head list");
  check(cudaMemcpy(st.heads.get(), heads.data(), sizeof(int) * heads.size(), cudaMemcpyHostToDevice),
        "heads");
  st.params.reserve(sizeof(HeadParamsDev) * hp.size(), "head params");
  check(cudaMemcpy(st.params.get(), hp.data(), sizeof(HeadParamsDev) * hp.size(), cudaMemcpyHostToDevice),
        "params");
  p.heads = st.heads.as<int>();

  EventTimer tTotal, tPredict, tSparse, tRef, tMetrics;
  tTotal.start();

  // ---- Stage 1 ----
  tPredict.start();
  auto key = std::make_tuple(g.blockQ, g.blockK, config.smoothK);
  State::Stats* stats = nullptr;
  if (auto it = st.stats.find(key); it != st.stats.end()) {
    stats = it->second.get();
  } else {
    auto s = std::make_unique<State::Stats>();
    const size_t BHk = (size_t)st.B * st.Hkv;
    s->pooledQ.reserve(BH * p.nq * st.D * 2, "pooled Q");
    s->pooledK.reserve(BHk * p.nk * st.D * 2, "pooled K");
    s->simQ.reserve(BH * p.nq * sizeof(float), "self-similarity Q");
    s->simK.reserve(BHk * p.nk * sizeof(float), "self-similarity K");
    s->scores.reserve(BH * grid * 2, "pooled scores");
    const void* km = nullptr;
    if (config.smoothK) {
      st.km.reserve(BHk * st.D * 2, "K mean");
      st.kmScratch.reserve(BHk * st.D * sizeof(double), "K mean scratch");
      launchKeyMean(st.et, st.k.get(), (int)BHk, st.Nkv, st.D, st.kmScratch.as<double>(), st.km.get(), 0);
      km = st.km.get();
    }
    launchBlockStats(st.et, st.q.get(), (int)BH, st.Nq, st.D, g.blockQ, nullptr, s->pooledQ.get(),
                     s->simQ.as<float>(), 0);
    launchBlockStats(st.et, st.k.get(), (int)BHk, st.Nkv, st.D, g.blockK, km, s->pooledK.get(),
                     s->simK.as<float>(), 0);
    launchScores(st.et, p, s->pooledQ.get(), s->pooledK.get(), s->scores.get(), 0);
    download(s->hostSimQ, s->simQ, BH * p.nq, "download self-similarity");
    download(s->hostSimK, s->simK, BHk * p.nk, "download self-similarity");
    stats = s.get();
    st.stats.emplace(key, std::move(s));
  }
  st.mask.reserve(BH * grid, "mask");
  st.reasons.reserve(BH * grid, "reasons");
  st.prob.reserve(BH * grid * sizeof(float), "pooled probabilities");
  st.lut.reserve(BH * grid * sizeof(int32_t), "LUT");
  st.valid.reserve(BH * p.nq * sizeof(int32_t), "LUT counts");
  launchSelect(st.et, p, stats->scores.get(), stats->simQ.as<float>(), stats->simK.as<float>(),
               st.params.as<HeadParamsDev>(), config.sink, st.mask.as<uint8_t>(), st.reasons.as<uint8_t>(),
               st.prob.as<float>(), st.lut.as<int32_t>(), st.valid.as<int32_t>(), 0);
  tPredict.stop();
  throwIfCancelled(options);

  // ---- Stage 2 ----
  st.o.reserve(BH * st.Nq * st.D * 2, "output");
  st.pvSkipped.reserve(BH * grid, "PV-skip map");
  st.emptyRows.reserve(BH * sizeof(int), "empty-row counters");
  check(cudaMemsetAsync(st.pvSkipped.get(), 0, BH * grid), "memset");
  check(cudaMemsetAsync(st.emptyRows.get(), 0, BH * sizeof(int)), "memset");
  tSparse.start();
  AttnArgs a;
  a.q = st.q.get();
  a.k = st.k.get();
  a.v = st.v.get();
  a.o = st.o.get();
  a.scaleLog2 = (float)(info.scale * 1.4426950408889634);
  a.lut = st.lut.as<int32_t>();
  a.validCount = st.valid.as<int32_t>();
  a.params = st.params.as<HeadParamsDev>();
  a.pvSkipped = st.pvSkipped.as<uint8_t>();
  a.emptyRows = st.emptyRows.as<int>();
  // A run in which every head is dense (the dense baseline of `sparge run --repeat`) uses the dense
  // kernel: same blocks and result as the sparse kernel over a full mask, but no LUT walk or skip test,
  // and its kernels are named sparge_dense_* so the profiler attributes them to the dense stage.
  bool allDense = true;
  for (int h : heads) allDense = allDense && config.forHead(h).dense;
  launchAttention(st.et, p, a, allDense, 0);
  tSparse.stop();
  throwIfCancelled(options);

  // ---- dense fp32 reference (cached per head) and error ----
  bool refComputed = false;
  const int nq64 = (int)ceilDiv(st.Nq, 64), nk64 = (int)ceilDiv(st.Nkv, 64);
  if (options.computeError) {
    std::vector<int> missing;
    for (int h : heads)
      if (!st.refDone[h]) missing.push_back(h);
    tRef.start();
    if (!missing.empty()) {
      if (!st.oref.get()) {
        st.oref.reserve(BH * st.Nq * st.D * sizeof(float), "fp32 reference output");
        st.mass64.reserve(BH * nq64 * nk64 * sizeof(float), "reference block mass");
      }
      DeviceBuffer missDev;
      missDev.reserve(sizeof(int) * missing.size(), "head list");
      check(cudaMemcpy(missDev.get(), missing.data(), sizeof(int) * missing.size(), cudaMemcpyHostToDevice),
            "heads");
      Problem pr = p;
      pr.heads = missDev.as<int>();
      pr.nHeads = (int)missing.size();
      launchReference(st.et, pr, st.q.get(), st.k.get(), st.v.get(), info.scale, st.oref.as<float>(),
                      st.mass64.as<float>(), 0);
      check(cudaDeviceSynchronize(), "reference");
      for (int h : missing) st.refDone[h] = 1;
      refComputed = true;
    }
    tRef.stop();
    throwIfCancelled(options);
    tMetrics.start();
    st.errSums.reserve(BH * p.nq * 8 * sizeof(double), "error sums");
    launchError(st.et, p, st.o.get(), st.oref.as<float>(), st.errSums.as<double>(), 0);
    tMetrics.stop();
  }
  tTotal.stop();
  check(cudaDeviceSynchronize(), "run");

  // ---- results to the host ----
  std::vector<uint8_t> hMask, hReasons, hSkip;
  std::vector<float> hProb, hMass;
  std::vector<int> hEmpty;
  std::vector<double> hErr;
  download(hMask, st.mask, BH * grid, "download mask");
  download(hReasons, st.reasons, BH * grid, "download reasons");
  download(hSkip, st.pvSkipped, BH * grid, "download PV-skip map");
  download(hProb, st.prob, BH * grid, "download probabilities");
  download(hEmpty, st.emptyRows, BH, "download empty rows");
  if (options.computeError) {
    download(hErr, st.errSums, BH * p.nq * 8, "download error sums");
    download(hMass, st.mass64, BH * nq64 * nk64, "download block mass");
  }

  auto& val = st.validity[std::make_tuple(g.blockQ, g.blockK)];
  if (val.valid.empty()) val = computeBlockValidity(g, st.Nq, st.Nkv, info.causal);

  EntryResult res;
  res.info = info;
  res.config = config;
  res.engine = name();
  if (info.dtype == DType::Float32)
    res.warnings.push_back("float32 capture run in float16 on the GPU (SpargeAttn casts float32 to float16)");
  for (int b = 0; b < st.B; ++b) {
    for (int h : heads) {
      const size_t bh = (size_t)b * st.Hq + h;
      const int hk = h / (st.Hq / st.Hkv);
      const size_t bhk = (size_t)b * st.Hkv + hk;
      HeadResult hr;
      hr.batch = b;
      hr.head = h;
      hr.params = config.forHead(h);
      hr.nq = p.nq;
      hr.nk = p.nk;
      hr.blockMask.assign(hMask.begin() + bh * grid, hMask.begin() + (bh + 1) * grid);
      hr.reasons.assign(hReasons.begin() + bh * grid, hReasons.begin() + (bh + 1) * grid);
      hr.pvSkipped.assign(hSkip.begin() + bh * grid, hSkip.begin() + (bh + 1) * grid);
      hr.pooledProb.assign(hProb.begin() + bh * grid, hProb.begin() + (bh + 1) * grid);
      hr.selfSimQ.assign(stats->hostSimQ.begin() + bh * p.nq, stats->hostSimQ.begin() + (bh + 1) * p.nq);
      hr.selfSimK.assign(stats->hostSimK.begin() + bhk * p.nk, stats->hostSimK.begin() + (bhk + 1) * p.nk);
      hr.similarQ.resize(p.nq);
      hr.similarK.resize(p.nk);
      for (int i = 0; i < p.nq; ++i) hr.similarQ[i] = hr.selfSimQ[i] > float(hr.params.theta);
      for (int j = 0; j < p.nk; ++j) hr.similarK[j] = hr.selfSimK[j] > float(hr.params.theta);

      hr.sparsity = countSparsity(val, hr.blockMask.data(), hr.pvSkipped.data());
      hr.emptyRows = hEmpty[bh];
      hr.hasNonFinite = st.inputNonFinite[bh] != 0;

      if (options.computeError) {
        hr.qBlockL1.resize(p.nq);
        ErrorSums& e = hr.error;
        for (int i = 0; i < p.nq; ++i) {
          const double* s = &hErr[(bh * p.nq + i) * 8];
          e.absDiff += s[0];
          e.absRef += s[1];
          e.dot += s[2];
          e.normO += s[3];
          e.normRef += s[4];
          e.sqDiff += s[5];
          e.count += (int64_t)s[6];
          if (s[7] > 0) hr.hasNonFinite = true;
          hr.qBlockL1[i] = s[1] > 0 ? (float)(s[0] / s[1]) : 0.f;
        }
        hr.refBlockMass.assign(grid, 0.f);
        for (int i = 0; i < p.nq; ++i) {
          int rows = std::min(g.blockQ, st.Nq - i * g.blockQ);
          int qt0 = i * g.blockQ / 64, qt1 = std::min(nq64, (i + 1) * g.blockQ / 64);
          for (int j = 0; j < p.nk; ++j) {
            int kt0 = j * g.blockK / 64, kt1 = std::min(nk64, (j + 1) * g.blockK / 64);
            double sum = 0;
            for (int qt = qt0; qt < qt1; ++qt)
              for (int kt = kt0; kt < kt1; ++kt) sum += hMass[(bh * nq64 + qt) * nk64 + kt];
            hr.refBlockMass[(size_t)i * p.nk + j] = (float)(sum / rows);
          }
        }
      }
      if (options.keepOutput) {
        std::vector<uint16_t> bits((size_t)st.Nq * st.D);
        check(cudaMemcpy(bits.data(), st.o.as<uint16_t>() + bh * st.Nq * st.D, bits.size() * 2,
                         cudaMemcpyDeviceToHost),
              "download output");
        hr.output.resize(bits.size());
        for (size_t x = 0; x < bits.size(); ++x) hr.output[x] = halfBitsToFloat(bits[x], st.et);
      }
      if (hr.emptyRows > 0)
        res.warnings.push_back("head " + std::to_string(h) + ": " + std::to_string(hr.emptyRows) +
                               " query rows see no key in their selected blocks (output set to 0)");
      if (hr.hasNonFinite)
        res.warnings.push_back("head " + std::to_string(h) + ": NaN/Inf in the inputs or output");
      res.heads.push_back(std::move(hr));
    }
  }

  StageTimes& t = res.times;
  t.clock = "cuda-event";
  t.predictMs = tPredict.ms();
  t.sparseMs = tSparse.ms();
  t.referenceMs = options.computeError && refComputed ? tRef.ms() : 0.0;
  t.referenceCached = options.computeError && !refComputed;
  t.metricsMs = options.computeError ? tMetrics.ms() : 0.0;
  t.totalMs = tTotal.ms();
  (void)wallStart;
  aggregate(res);
  return res;
}

}  // namespace sparge::cuda
