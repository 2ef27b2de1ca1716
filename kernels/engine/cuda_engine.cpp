// CudaEngine: uploads an entry once, caches what does not depend on the thresholds (Stage-1 statistics, the
// fp32 reference, the quantized dense error), and runs each call as named stages: plan, predict, quantize,
// sparse, errors, results.
#include "sparge/kernels/cuda_engine.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/head_dim.h"
#include "engine/engine_state.h"
#include "sparge/core/error.h"
#include "sparge/core/parallel.h"
#include "sparge/core/run_request.h"

namespace sparge::cuda {

namespace {
constexpr const char* kWhere = "cuda engine";

void throwIfCancelled(const core::RunOptions& o) {
  if (o.cancel && o.cancel->load()) throw core::Cancelled();
}

void checkSupported(const core::EntryInfo& info, const core::RunConfig& config) {
  requireHeadDim(info.headDim, kWhere);
  if (info.headDimV != info.headDim)
    throw Error(kWhere, "Dv = " + std::to_string(info.headDimV) +
                            " differs from D = " + std::to_string(info.headDim) +
                            "; the CUDA kernels need Dv == D (use --engine cpu)");
  if (info.headsKV <= 0 || info.headsQ % info.headsKV != 0)
    throw Error(kWhere, "query heads must be a multiple of KV heads");
  const int64_t maxInt = std::numeric_limits<int>::max() / 256;
  if (info.tokensQ > maxInt || info.tokensKV > maxInt)
    throw Error(kWhere, "sequence too long for the CUDA engine");
  const core::Geometry g = config.geometry;
  if (!(g == core::kGeometry128x64 || g == core::kGeometry64x128))
    throw Error(kWhere, "geometry " + g.label() + " is not supported (128x64 or 64x128)");
}

void upload(CudaEngine::State& st, const core::EntryData& entry) {
  const core::EntryInfo& info = entry.info;
  st.qkv.et = info.dtype == core::DType::BFloat16 ? ElemType::BF16 : ElemType::F16;
  st.B = (int)info.batch;
  st.Hq = (int)info.headsQ;
  st.Hkv = (int)info.headsKV;
  st.Nq = (int)info.tokensQ;
  st.Nkv = (int)info.tokensKV;
  st.D = (int)info.headDim;
  // NaN/Inf per head of each tensor, found while converting: a head's flag covers its Q and its KV head.
  std::vector<uint8_t> qBad(size_t(st.B) * st.Hq), kBad(size_t(st.B) * st.Hkv), vBad(kBad.size());
  auto up = [&](DeviceBuffer& d, const core::FloatBuffer& h, std::vector<uint8_t>& bad, const char* what) {
    d.reserve(h.size() * 2, what);
    st.staging->upload(d.get(), h.data(), int64_t(bad.size()), h.size() / bad.size(), st.qkv.et, bad.data(),
                       what);
  };
  up(st.q, entry.q, qBad, "upload Q");
  up(st.k, entry.k, kBad, "upload K");
  up(st.v, entry.v, vBad, "upload V");
  st.qkv.q = st.q.get();
  st.qkv.k = st.k.get();
  st.qkv.v = st.v.get();
  st.inputNonFinite.assign((size_t)st.B * st.Hq, 0);
  for (int b = 0; b < st.B; ++b)
    for (int h = 0; h < st.Hq; ++h) {
      const size_t kv = size_t(b) * st.Hkv + size_t(info.kvHeadOf(h));
      st.inputNonFinite[size_t(b) * st.Hq + h] = qBad[size_t(b) * st.Hq + h] | kBad[kv] | vBad[kv];
    }
  st.refDone.assign(st.Hq, 0);
  st.uploaded = true;
}

// Heads, problem and device-side parameters of one run.
RunPlan makePlan(CudaEngine::State& st, const core::EntryInfo& info, const core::RunConfig& config,
                 const core::RunOptions& options) {
  RunPlan plan{config, options, {}, {}, 0, 0, true};
  for (int64_t h : core::resolveRunHeads(info, config, options.heads)) plan.heads.push_back((int)h);
  plan.p = makeProblem(st.B, st.Hq, st.Hkv, st.Nq, st.Nkv, st.D, config.geometry, info.causal, info.window);
  plan.p.nHeads = (int)plan.heads.size();
  plan.BH = (size_t)st.B * st.Hq;
  plan.grid = (size_t)plan.p.nq * plan.p.nk;
  for (int h : plan.heads) plan.allDense = plan.allDense && config.forHead(h).dense;

  std::vector<HeadParamsDev> hp(st.Hq);
  for (int h = 0; h < st.Hq; ++h) hp[h] = toDeviceParams(config.forHead(h));
  uploadHeads(st.heads, plan.heads);
  st.params.reserve(sizeof(HeadParamsDev) * hp.size(), "head params");
  check(cudaMemcpy(st.params.get(), hp.data(), sizeof(HeadParamsDev) * hp.size(), cudaMemcpyHostToDevice),
        "params");
  plan.p.heads = st.heads.as<int>();
  return plan;
}

// Validity (causal rule and window) and the diagonal of geometry g: the same for every head and run.
const std::vector<uint8_t>& blockFlagsOf(CudaEngine::State& st, const core::EntryInfo& info,
                                         const core::Geometry& g) {
  const auto key = std::make_tuple(g.blockQ, g.blockK);
  auto& v = st.validity[key];
  if (v.valid.empty()) v = core::computeBlockValidity(g, st.Nq, st.Nkv, info.causal, info.window);
  auto& flags = st.blockFlags[key];
  if (flags.empty()) flags = blockFlags(v, g, st.Nq, st.Nkv, info.causal, info.window);
  return flags;
}

// Stage 1 of a method other than SpargeAttn (kernels/predictors), its statistics cached there.
void predictMethod(CudaEngine::State& st, const core::EntryInfo& info, const RunPlan& plan) {
  const core::RunConfig& c = plan.config;
  predictors::MethodRun r;
  r.method = c.method;
  r.qkv = st.qkv;
  r.problem = plan.p;
  r.scale = info.scale;
  r.heads = plan.heads;
  std::vector<core::HeadParams> params(size_t(st.Hq));
  for (int h = 0; h < st.Hq; ++h) params[size_t(h)] = c.forHead(h);
  r.params = &params;
  r.paramsDev = st.params.as<HeadParamsDev>();
  r.forced = ForcedOn{c.sink, c.diagonal};
  st.selection.setBlocks(blockFlagsOf(st, info, c.geometry), c.geometry);
  st.methodStage1.run(r, st.selection);
}

// Stage 1: statistics (cached per geometry and smooth-K), then the selection and LUT of this run.
void predict(CudaEngine::State& st, const core::EntryInfo& info, const RunPlan& plan) {
  const core::RunConfig& c = plan.config;
  if (c.method != core::Method::SpargeAttn) return predictMethod(st, info, plan);
  auto key = std::make_tuple(c.geometry.blockQ, c.geometry.blockK, c.smoothK);
  auto& stats = st.stats[key];
  if (!stats) {
    auto fresh = std::make_unique<Stage1Stats>();
    const void* km = c.smoothK ? st.keyMean.get(st.qkv, plan.p, true, 0) : nullptr;
    fresh->compute(st.qkv, plan.p, km, 0);
    HostCaches::Similarity& sim = st.host.similarity[key];  // for every later run's results
    download(sim.q, fresh->simQ, plan.BH * plan.p.nq, "download self-similarity");
    download(sim.k, fresh->simK, (size_t)st.B * st.Hkv * plan.p.nk, "download self-similarity");
    stats = std::move(fresh);  // cached only with its host copy
  }
  st.selection.setBlocks(blockFlagsOf(st, info, c.geometry), c.geometry);
  st.selection.select(st.qkv, plan.p, *stats, st.params.as<HeadParamsDev>(), ForcedOn{c.sink, c.diagonal},
                      st.switches, 0);
}

// The operands of the chosen numerics, quantized on every call (a deployed call pays for it too).
const QuantOperands* quantize(CudaEngine::State& st, const RunPlan& plan) {
  if (!plan.quantized()) return nullptr;
  const void* km = st.keyMean.get(st.qkv, plan.p, plan.config.smoothK, 0);
  return &st.quant.run(st.qkv, plan.p, plan.config.numerics, km, 0);
}

// Stage 2 as deployed: the chosen numerics over the selected blocks, with the PV skip. A run in which every
// head is dense (the dense baseline) uses the dense kernel: the same result as the sparse kernel over a full
// mask, without the LUT walk or skip test, named sparge_dense_* for the profiler.
void sparse(CudaEngine::State& st, const core::EntryInfo& info, const RunPlan& plan,
            const QuantOperands* quant) {
  st.o.reserve(plan.BH * st.Nq * st.D * 2, "output");
  st.pvSkipped.reserve(plan.BH * plan.grid, "PV-skip map");
  st.emptyRows.reserve(plan.BH * sizeof(int), "empty-row counters");
  check(cudaMemsetAsync(st.pvSkipped.get(), 0, plan.BH * plan.grid), "memset");
  check(cudaMemsetAsync(st.emptyRows.get(), 0, plan.BH * sizeof(int)), "memset");
  const AttnArgs a = makeAttnArgs(st.qkv, info.scale, st.selection, st.params.as<HeadParamsDev>(), st.o.get(),
                                  st.pvSkipped.as<uint8_t>(), st.emptyRows.as<int>(), plan.config.numerics,
                                  quant, st.switches);
  launchAttention(st.qkv.et, plan.p, a, plan.allDense, 0);
}

// The deployed call: Stage 1 (its maps start for the host at once), the operands of the chosen numerics and
// Stage 2. Returns the operands (null for exact numerics).
const QuantOperands* deployedPass(CudaEngine::State& st, const core::EntryInfo& info, const RunPlan& plan,
                                  StageClock& clock) {
  st.copies.side.before(0);  // the selection's maps of a cancelled run may still be on their way
  clock.predict.start();
  predict(st, info, plan);
  clock.predict.stop();
  queueSelectionCopies(st, plan, clock);
  throwIfCancelled(plan.options);
  clock.quantize.start();
  const QuantOperands* quant = quantize(st, plan);
  clock.quantize.stop();
  clock.sparse.start();
  sparse(st, info, plan, quant);
  clock.sparse.stop();
  return quant;
}

// The device times of the stages (their events have completed once the results are collected).
void setDeviceTimes(core::StageTimes& t, StageClock& clock, const RunPlan& plan) {
  const bool errors = plan.options.computeError;
  t.clock = "cuda-event";
  t.predictMs = clock.predict.elapsedMs();
  t.quantizeMs = plan.quantized() ? clock.quantize.elapsedMs() : 0.0;
  t.sparseMs = clock.sparse.elapsedMs();
  t.referenceMs = clock.referenceRan ? clock.reference.elapsedMs() : 0.0;
  t.referenceCached = errors && !clock.referenceRan;
  t.metricsMs = errors ? clock.errors.elapsedMs() : 0.0;
  t.totalMs = clock.total.elapsedMs();
}

// The split after an early result `shown`: its pass is queued, then the result is copied (beside the pass)
// and completed with its sums; the split's time goes into the stage times.
core::EntryResult finishSplit(CudaEngine::State& st, const core::EntryData& entry, const RunPlan& plan,
                              const core::EntryResult& shown, StageClock& clock,
                              HostClock::time_point start) {
  computeSplit(st, entry, plan, clock);
  core::EntryResult res = shown;
  addSplit(st, plan, res);
  const double splitMs = clock.split.elapsedMs();
  res.times.metricsMs += splitMs;
  res.times.totalMs += splitMs;
  res.times.hostMs = msSince(start);
  return res;
}

bool sameShape(const core::EntryInfo& a, const core::EntryInfo& b) {
  return a.batch == b.batch && a.headsQ == b.headsQ && a.headsKV == b.headsKV && a.tokensQ == b.tokensQ &&
         a.tokensKV == b.tokensKV && a.headDim == b.headDim && a.headDimV == b.headDimV;
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

CudaEngine::CudaEngine()
    : deviceName_(deviceNameOrThrow()),
      computeCapability_(deviceComputeCapability()),
      state_(std::make_unique<State>()) {
  state_->switches = KernelSwitches::fromEnvironment();
  // The device's context (0.1-1 s, longer while other processes start theirs) is made here rather than by
  // the first run's first allocation: callers create the engine while the first entry loads (a tuning rank
  // does), so the two overlap.
  check(cudaFree(nullptr), "creating the CUDA context");
}
CudaEngine::~CudaEngine() = default;

std::string CudaEngine::name() const {
  return "cuda: " + deviceName_;
}

void CudaEngine::State::keepBuffersOf(State& old, bool sameShape) {
  staging = std::move(old.staging);
  if (!sameShape) return;
  for (auto [to, from] : {std::pair{&q, &old.q},
                          {&k, &old.k},
                          {&v, &old.v},
                          {&o, &old.o},
                          {&oref, &old.oref},
                          {&scratchO, &old.scratchO}})
    *to = std::move(*from);
}

void CudaEngine::setEntry(std::shared_ptr<const core::EntryData> entry) {
  const bool alike = entry_ && entry && sameShape(entry_->info, entry->info);
  entry_ = std::move(entry);
  // A fresh state: no cache of the previous entry survives; the rest of its buffers are freed with it.
  auto fresh = std::make_unique<State>();
  fresh->switches = state_->switches;
  fresh->keepBuffersOf(*state_, alike);
  state_ = std::move(fresh);
}

core::EntryResult CudaEngine::run(const core::RunConfig& config, const core::RunOptions& options) {
  // The kernels take one numerics per call: heads of other numerics (the exact fallback) run as calls of
  // their own.
  if (config.mixedNumerics()) return core::runByNumerics(*this, config, options);
  const HostClock::time_point start = HostClock::now();
  if (!entry_) throw Error(kWhere, "no entry selected");
  const core::EntryInfo& info = entry_->info;
  checkSupported(info, config);
  State& st = *state_;
  if (!st.uploaded) upload(st, *entry_);
  const RunPlan plan = makePlan(st, info, config, options);
  st.copies.bytes = 0;

  StageClock clock;
  clock.total.start();
  const QuantOperands* quant = deployedPass(st, info, plan, clock);
  throwIfCancelled(options);
  // Quantized numerics for a viewer: the result goes out before the exact-numerics pass of the split.
  const bool early = options.computeError && plan.quantized() && options.onDeployed;
  RunErrors errors;
  if (options.computeError) errors = computeErrors(st, *entry_, plan, quant, clock, !early);
  clock.total.stop();
  const RunErrors* errorsRan = options.computeError ? &errors : nullptr;
  queueAttentionCopies(st, plan, errorsRan, clock);

  core::EntryResult res = collectResults(st, *entry_, plan, errorsRan, name(), clock, start);
  setDeviceTimes(res.times, clock, plan);
  res.times.hostMs = msSince(start);
  if (!early) return res;
  res.splitPending = true;
  auto shown = std::make_shared<core::EntryResult>(std::move(res));
  if (!options.onDeployed(shown)) return core::withoutHeads(*shown);
  throwIfCancelled(options);
  return finishSplit(st, *entry_, plan, *shown, clock, start);
}

void CudaEngine::ensureCudnn() {
  if (!entry_) throw Error(kWhere, "no entry selected");
  State& st = *state_;
  if (st.cudnn) return;
  if (!st.cudnnError.empty()) throw Error("cuDNN baseline", st.cudnnError);
  if (!st.uploaded) upload(st, *entry_);
  const core::EntryInfo& info = entry_->info;
  SdpaShape shape{st.qkv.et, st.B, st.Hq, st.Hkv, st.Nq, st.Nkv, st.D, info.causal, info.window, info.scale};
  try {
    st.cudnn = std::make_unique<CudnnSdpa>(shape);
  } catch (const Error& e) {
    st.cudnnError = e.problem();  // a plan that cannot be built now will not be built later either
    throw;
  }
}

std::vector<core::DenseBaseline> CudaEngine::denseBaselines() {
  core::DenseBaseline b;
  b.name = "cudnn";
  const CudnnAvailability& lib = cudnnAvailability();
  b.label = lib.ok ? lib.label() + " fused SDPA" : "cuDNN fused SDPA";
  try {
    ensureCudnn();
    b.available = true;
    b.label = state_->cudnn->label();
  } catch (const Error& e) {
    b.reason = e.problem();
  }
  return {b};
}

double CudaEngine::runDenseBaseline(const std::string& name) {
  if (name != "cudnn") return core::Engine::runDenseBaseline(name);
  ensureCudnn();
  State& st = *state_;
  st.cudnnO.reserve((size_t)st.B * st.Hq * st.Nq * st.D * 2, "cuDNN output");
  prof::EventTimer timer;
  timer.start();
  st.cudnn->run(st.q.get(), st.k.get(), st.v.get(), st.cudnnO.get(), 0);
  timer.stop();
  return timer.elapsedMs();
}

}  // namespace sparge::cuda
