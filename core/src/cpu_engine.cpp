// CpuEngine: runs Stage 1, Stage 2 (the deployed run, the same mask in exact numerics, and the dense outputs
// the first time they are needed, all in one pass over the key blocks), and the error metrics per head, in
// phases so that each phase's wall time is measured on its own.
#include "sparge/core/cpu_engine.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "sparge/core/error.h"
#include "sparge/core/parallel.h"
#include "sparge/core/run_request.h"

namespace sparge::core {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void checkCancel(const RunOptions& o) {
  if (o.cancel && o.cancel->load()) throw Cancelled();
}

constexpr double kNoSkip = std::numeric_limits<double>::infinity();

// Error sums of `o` against `ref` over query rows [0, nQ); with `qBlockL1`, the L1 of every query tile too.
ErrorSums compare(const std::vector<float>& o, const std::vector<float>& ref, int64_t nQ, int64_t dv,
                  int blockQ, bool* nonFinite, std::vector<float>* qBlockL1) {
  ErrorSums e;
  const int nq = int(ceilDiv(nQ, blockQ));
  if (qBlockL1) qBlockL1->assign(nq, 0.0f);
  for (int i = 0; i < nq; ++i) {
    double blockDiff = 0, blockRef = 0;
    const int64_t r0 = int64_t(i) * blockQ, r1 = std::min<int64_t>(nQ, r0 + blockQ);
    for (int64_t x = r0 * dv; x < r1 * dv; ++x) {
      const double a = o[x], b = ref[x];
      if (!std::isfinite(a) || !std::isfinite(b)) *nonFinite = true;
      const double diff = a - b;
      blockDiff += std::fabs(diff);
      blockRef += std::fabs(b);
      e.dot += a * b;
      e.normO += a * a;
      e.normRef += b * b;
      e.sqDiff += diff * diff;
    }
    e.absDiff += blockDiff;
    e.absRef += blockRef;
    if (qBlockL1) (*qBlockL1)[i] = blockRef > 0 ? float(blockDiff / blockRef) : 0.0f;
  }
  e.count = int64_t(o.size());
  return e;
}

}  // namespace

// What Stage 2 produced for one head: the deployed output, the exact-numerics sparse output (quantized runs)
// and the dense outputs it was compared with.
struct CpuEngine::HeadOutputs {
  std::vector<float> deployed, exactSparse;
  const DenseOutput* reference = nullptr;
  const DenseOutput* quantDense = nullptr;
  bool referenceComputed = false;
  bool nonFinite = false;
  std::vector<int64_t> zeroVChannels;
};

CpuEngine::CpuEngine(int threads)
    : threads_(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()))) {}

CpuEngine::~CpuEngine() = default;

std::string CpuEngine::name() const {
  return "cpu (" + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
}

void CpuEngine::setEntry(std::shared_ptr<const EntryData> entry) {
  std::lock_guard<std::mutex> lock(cacheMutex_);
  entry_ = std::move(entry);
  references_.clear();
  quantDense_.clear();
  stats_.clear();
  validity_.clear();
  methodStats_.clear();
}

const BlockStats& CpuEngine::blockStats(int64_t b, int64_t h, const Geometry& g, bool smoothK) {
  const auto key = std::make_tuple(b, h, g.blockQ, g.blockK, smoothK);
  {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    auto it = stats_.find(key);
    if (it != stats_.end()) return *it->second;
  }
  const EntryInfo& info = entry_->info;
  auto st = std::make_unique<BlockStats>(
      computeBlockStats(entry_->qHead(b, h), info.tokensQ, entry_->kHead(b, info.kvHeadOf(h)), info.tokensKV,
                        info.headDim, info.dtype, g, smoothK, info.causal, info.window));
  std::lock_guard<std::mutex> lock(cacheMutex_);
  auto& slot = stats_[key];
  if (!slot) slot = std::move(st);
  return *slot;
}

const BlockValidity& CpuEngine::blockValidity(const Geometry& g) {
  std::lock_guard<std::mutex> lock(cacheMutex_);
  auto& slot = validity_[std::make_pair(g.blockQ, g.blockK)];
  if (!slot) {
    const EntryInfo& info = entry_->info;
    slot = std::make_unique<BlockValidity>(
        computeBlockValidity(g, info.tokensQ, info.tokensKV, info.causal, info.window));
  }
  return *slot;
}

const CpuEngine::DenseOutput* CpuEngine::cachedReference(const ReferenceKey& key) {
  std::lock_guard<std::mutex> lock(cacheMutex_);
  auto it = references_.find(key);
  return it == references_.end() ? nullptr : it->second.get();
}

const CpuEngine::DenseOutput* CpuEngine::cachedQuantDense(const QuantDenseKey& key) {
  std::lock_guard<std::mutex> lock(cacheMutex_);
  auto it = quantDense_.find(key);
  return it == quantDense_.end() ? nullptr : it->second.get();
}

HeadOperands CpuEngine::operands(int64_t b, int64_t h, bool smoothK, std::vector<float>& keyMean) const {
  const EntryInfo& info = entry_->info;
  const int64_t hk = info.kvHeadOf(h);
  HeadOperands op;
  op.q = entry_->qHead(b, h);
  op.k = entry_->kHead(b, hk);
  op.v = entry_->vHead(b, hk);
  op.nQ = info.tokensQ;
  op.nKv = info.tokensKV;
  op.d = info.headDim;
  op.dv = info.headDimV;
  op.scale = info.scale;
  op.causal = info.causal;
  op.window = info.window;
  op.dtype = info.dtype;
  if (smoothK) {
    keyMean = keyTokenMean(op.k, op.nKv, op.d, op.dtype);
    op.keyMean = keyMean.data();
  }
  return op;
}

// One head's Stage 2: the deployed pass, plus (when errors are wanted) the same mask in exact numerics and
// whichever dense outputs are not cached yet, all in one stage2Passes call so they share the key scores.
CpuEngine::HeadOutputs CpuEngine::runStage2(HeadResult& hr, const RunConfig& config, bool computeError) {
  const Geometry& g = config.geometry;
  const bool quant = config.numerics != Numerics::None;
  const ReferenceKey refKey{hr.batch, hr.head, g.blockQ, g.blockK};
  const QuantDenseKey qdKey{hr.batch, hr.head, g.blockQ, g.blockK, config.numerics, config.smoothK};
  HeadOutputs o;
  if (computeError) {
    o.reference = cachedReference(refKey);
    if (quant) o.quantDense = cachedQuantDense(qdKey);
  }
  const std::vector<uint8_t>& valid = blockValidity(g).valid;
  std::vector<PassSpec> passes;
  // A dense head never skips PV.
  const double lambda = hr.params.dense ? kNoSkip : hr.params.lambda;
  passes.push_back({config.numerics, hr.blockMask.data(), lambda, false});
  const int exactSparse = computeError && quant ? int(passes.size()) : -1;
  if (exactSparse >= 0) passes.push_back({Numerics::None, hr.blockMask.data(), lambda, false});
  const int reference = computeError && !o.reference ? int(passes.size()) : -1;
  if (reference >= 0) passes.push_back({Numerics::None, valid.data(), kNoSkip, true});
  const int quantDense = computeError && quant && !o.quantDense ? int(passes.size()) : -1;
  if (quantDense >= 0) passes.push_back({config.numerics, valid.data(), kNoSkip, false});

  std::vector<float> keyMean;
  std::vector<AttentionOutput> outs =
      stage2Passes(operands(hr.batch, hr.head, config.smoothK, keyMean), g, passes);
  hr.pvSkipped = std::move(outs[0].pvSkipped);
  hr.emptyRows = outs[0].emptyRows;
  o.deployed = std::move(outs[0].out);
  o.zeroVChannels = std::move(outs[0].zeroVChannels);
  for (const AttentionOutput& a : outs) o.nonFinite |= a.nonFinite;
  if (exactSparse >= 0) o.exactSparse = std::move(outs[size_t(exactSparse)].out);
  auto store = [&](auto& cache, const auto& key, AttentionOutput& a) {
    auto d = std::make_unique<DenseOutput>();
    d->out = std::move(a.out);
    d->blockMass = std::move(a.blockMass);
    d->nonFinite = a.nonFinite;
    std::lock_guard<std::mutex> lock(cacheMutex_);
    auto& slot = cache[key];
    if (!slot) slot = std::move(d);
    return static_cast<const DenseOutput*>(slot.get());
  };
  if (reference >= 0) {
    o.reference = store(references_, refKey, outs[size_t(reference)]);
    o.referenceComputed = true;
  }
  if (quantDense >= 0) o.quantDense = store(quantDense_, qdKey, outs[size_t(quantDense)]);
  return o;
}

void CpuEngine::computeErrors(HeadResult& hr, const HeadOutputs& o, const RunConfig& config) {
  const EntryInfo& info = entry_->info;
  const int bq = config.geometry.blockQ;
  bool nonFinite = o.nonFinite || o.reference->nonFinite;
  hr.refBlockMass = o.reference->blockMass;
  hr.error = compare(o.deployed, o.reference->out, info.tokensQ, info.headDimV, bq, &nonFinite, &hr.qBlockL1);
  if (config.numerics == Numerics::None) {
    hr.errorSparse = hr.error;
    hr.errorQuant = ErrorSums{};
  } else {
    nonFinite |= o.quantDense->nonFinite;
    hr.errorSparse =
        compare(o.exactSparse, o.reference->out, info.tokensQ, info.headDimV, bq, &nonFinite, nullptr);
    hr.errorQuant =
        compare(o.quantDense->out, o.reference->out, info.tokensQ, info.headDimV, bq, &nonFinite, nullptr);
  }
  hr.hasNonFinite = hr.hasNonFinite || nonFinite;
  // Non-finite scores can leave both outputs at 0 (every score -inf): the figures must not read as perfect.
  if (hr.hasNonFinite)
    for (ErrorSums* e : {&hr.error, &hr.errorSparse, &hr.errorQuant}) {
      const int64_t count = e->count;
      *e = ErrorSums{};
      e->absDiff = e->absRef = e->dot = e->normO = e->normRef = e->sqDiff =
          std::numeric_limits<double>::quiet_NaN();
      e->count = count;
    }
}

EntryResult CpuEngine::run(const RunConfig& config, const RunOptions& options) {
  if (!entry_) throw Error("cpu engine", "no entry loaded: open a capture and select an entry first");
  const EntryInfo& info = entry_->info;
  const Geometry g = config.geometry;
  const std::vector<int64_t> heads = resolveRunHeads(info, config, options.heads);

  EntryResult result;
  result.info = info;
  result.config = config;
  result.engine = name();
  const int64_t tasks = info.batch * int64_t(heads.size());
  result.heads.resize(tasks);
  const int nq = int(ceilDiv(info.tokensQ, g.blockQ)), nk = int(ceilDiv(info.tokensKV, g.blockK));
  const auto tStart = Clock::now();

  // Phase 1: Stage 1 (block statistics are cached per head, geometry and smooth_k).
  auto t0 = Clock::now();
  parallelFor(tasks, threads_, [&](int64_t t) {
    checkCancel(options);
    HeadResult& hr = result.heads[t];
    hr.batch = t / int64_t(heads.size());
    hr.head = heads[t % heads.size()];
    hr.params = config.forHead(hr.head);
    hr.nq = nq;
    hr.nk = nk;
    if (config.method != Method::SpargeAttn)
      return predictHead(hr, *entry_, config, blockValidity(g), methodStats_);
    const BlockStats& st = blockStats(hr.batch, hr.head, g, config.smoothK);
    Stage1Mask m = selectBlocks(st, hr.params, {config.sink, config.diagonal}, info.tokensQ, info.tokensKV);
    hr.blockMask = std::move(m.mask);
    hr.reasons = std::move(m.reasons);
    hr.pooledProb = std::move(m.pooledProb);
    hr.similarQ = std::move(m.similarQ);
    hr.similarK = std::move(m.similarK);
    hr.selfSimQ = st.selfSimQ;
    hr.selfSimK = st.selfSimK;
  });
  result.times.predictMs = msSince(t0);

  // Phase 2: Stage 2 (and the dense outputs not cached yet, in the same pass).
  t0 = Clock::now();
  const BlockValidity& validity = blockValidity(g);
  std::vector<HeadOutputs> outputs(tasks);
  parallelFor(tasks, threads_, [&](int64_t t) {
    checkCancel(options);
    HeadResult& hr = result.heads[t];
    outputs[t] = runStage2(hr, config, options.computeError);
    // Exact denominators: only blocks holding a valid token pair count, by block and by token area.
    hr.sparsity = countSparsity(validity, hr.blockMask.data(), hr.pvSkipped.data());
  });
  result.times.sparseMs = msSince(t0);
  bool referenceComputed = false;
  for (const HeadOutputs& o : outputs) referenceComputed |= o.referenceComputed;
  result.times.referenceMs = 0.0;
  result.times.referenceCached = options.computeError && !referenceComputed;
  result.times.referenceInSparse = referenceComputed;

  // Phase 3: error metrics against the reference.
  if (options.computeError) {
    t0 = Clock::now();
    parallelFor(tasks, threads_, [&](int64_t t) { computeErrors(result.heads[t], outputs[t], config); });
    result.times.metricsMs = msSince(t0);
  } else {
    for (int64_t t = 0; t < tasks; ++t) result.heads[t].hasNonFinite = outputs[t].nonFinite;
  }
  if (options.keepOutput)
    for (int64_t t = 0; t < tasks; ++t) result.heads[t].output = std::move(outputs[t].deployed);
  result.times.totalMs = msSince(tStart);
  result.times.clock = "wall";
  for (int64_t t = 0; t < tasks; ++t) {
    const HeadResult& hr = result.heads[t];
    const std::string head =
        "head " + std::to_string(hr.head) + (info.batch > 1 ? " batch " + std::to_string(hr.batch) : "");
    if (hr.emptyRows > 0)
      result.warnings.push_back(head + ": " + std::to_string(hr.emptyRows) +
                                " query rows see no key in their selected blocks (output set to 0; --sink "
                                "keeps key block 0 on for every row)");
    if (!outputs[t].zeroVChannels.empty()) {
      std::string list;
      for (int64_t c : outputs[t].zeroVChannels) list += (list.empty() ? "" : ", ") + std::to_string(c);
      result.warnings.push_back(
          head + ": V channel(s) " + list +
          " are 0 for every token; their FP8 V scale (amax / 2.25) is 0, and SpargeAttn's "
          "kernel outputs NaN there (so does this emulation)");
    }
    if (hr.hasNonFinite)
      result.warnings.push_back(head +
                                ": NaN/Inf attention scores or outputs (inputs near the float limits or an "
                                "extreme softmax scale); its error figures are not meaningful");
  }
  aggregate(result);
  return result;
}

}  // namespace sparge::core
