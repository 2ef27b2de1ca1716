// CpuEngine: runs Stage 1, Stage 2 (the deployed run, the same mask in exact numerics, and the dense outputs
// the first time they are needed, all in one pass over the key blocks) and the error metrics, in phases so
// that each phase's wall time is measured on its own. Stage 2 is spread over the threads by query tile, the
// costliest tiles of every head first, so that both cores stay busy on causal entries and on few heads.
#include "sparge/core/cpu_engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <thread>

#include "sparge/core/error.h"
#include "sparge/core/parallel.h"
#include "sparge/core/run_request.h"
#include "stage2.h"

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

// The error sums of a head from those of its query tiles (added in tile order, so the figures do not depend
// on the thread count); with `qBlockL1`, the L1 of every tile too.
ErrorSums sumTiles(const std::vector<tile::CompareSums>& tiles, int64_t count, bool* nonFinite,
                   std::vector<float>* qBlockL1) {
  ErrorSums e;
  if (qBlockL1) qBlockL1->assign(tiles.size(), 0.0f);
  for (size_t i = 0; i < tiles.size(); ++i) {
    const tile::CompareSums& c = tiles[i];
    e.absDiff += c.absDiff;
    e.absRef += c.absRef;
    e.dot += c.dot;
    e.normO += c.normO;
    e.normRef += c.normRef;
    e.sqDiff += c.sqDiff;
    *nonFinite = *nonFinite || c.nonFinite;
    if (qBlockL1) (*qBlockL1)[i] = c.absRef > 0 ? float(c.absDiff / c.absRef) : 0.0f;
  }
  e.count = count;
  return e;
}

// Non-finite scores can leave both outputs at 0 (every score -inf): the figures must not read as perfect.
void poisonErrors(HeadResult& hr) {
  if (!hr.hasNonFinite) return;
  for (ErrorSums* e : {&hr.error, &hr.errorSparse, &hr.errorQuant, &hr.errorQuantQk}) {
    const int64_t count = e->count;
    *e = ErrorSums{};
    e->absDiff = e->absRef = e->dot = e->normO = e->normRef = e->sqDiff =
        std::numeric_limits<double>::quiet_NaN();
    e->count = count;
  }
}

}  // namespace

std::string cpuIsa() {
  return tile::kernels().isa;
}

std::vector<std::string> cpuIsaVariants() {
  return tile::variants();
}

void useCpuIsa(const std::string& isa) {
  tile::useVariant(isa);
}

// One (batch, head) of a run: its Stage-2 buffers and outputs, kept from run to run so that a parameter
// change allocates nothing large.
struct CpuEngine::HeadWork {
  HeadStage2 stage2;
  HeadOperands operands;
  std::vector<PassSpec> passes;
  std::vector<AttentionOutput*> outs;
  std::vector<TileHistory*> histories;
  // The last three when not cached; quantQkDense: INT8 scores with exact P·V (RunOptions::quantBreakdown).
  AttentionOutput deployed, exactSparse, reference, quantDense, quantQkDense;
  TileHistory deployedTiles, sparseTiles;  // what deployed and exactSparse hold from earlier runs
  // The passes of the current phase: their index, -1 when they do not run.
  int deployedPass = -1, sparsePass = -1, referencePass = -1, quantDensePass = -1, quantQkPass = -1;
  bool runsSparse = false, runsReference = false, runsQuantDense = false, runsQuantQk = false;
  int64_t group = -1;  // the last group of heads this one ran in (the others may be evicted)
  const DenseOutput* cachedRef = nullptr;
  const DenseOutput* cachedQuantDense = nullptr;
  const DenseOutput* cachedQuantQk = nullptr;
  // Per query tile: the error sums, and whether those of deployed and exactSparse are of their current rows.
  std::vector<tile::CompareSums> vsDeployed, vsSparse, vsQuantDense, vsQuantQk;
  std::vector<uint8_t> deployedCompared, sparseCompared;

  const float* referenceData() const { return cachedRef ? cachedRef->out.data() : reference.out.data(); }
};

struct CpuEngine::Workspace {
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<HeadWork>> byHead;  // (batch, head)
  std::vector<HeadWork*> heads;                                             // per head of the group being run
  int64_t groups = 0;                                                       // groups run so far
  std::vector<TileScratch> scratch;                                         // per worker
  std::vector<std::pair<int64_t, int>> order;  // (slot, query tile), costliest first
  bool deferSplit = false;  // this run hands out the deployed figures before the exact sparse runs
  std::vector<std::vector<int64_t>> zeroVChannels;  // per head of the run: FP8 V channels that are all 0
};

CpuEngine::CpuEngine(int threads) : threads_(usableThreads(threads)), ws_(std::make_unique<Workspace>()) {}

CpuEngine::~CpuEngine() = default;

std::string CpuEngine::name() const {
  return "cpu (" + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
}

void CpuEngine::setEntry(std::shared_ptr<const EntryData> entry) {
  std::lock_guard<std::mutex> lock(cacheMutex_);
  entry_ = std::move(entry);
  ++entryCount_;
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

HeadOperands CpuEngine::operands(int64_t b, int64_t h, const BlockStats& stats) const {
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
  op.keyMean = stats.keyMean.empty() ? nullptr : stats.keyMean.data();
  return op;
}

void CpuEngine::spread(int64_t count, const RunOptions& options,
                       const std::function<void(int64_t, int)>& task) {
  const int workers = int(std::max<int64_t>(1, std::min<int64_t>(threads_, count)));
  std::atomic<int64_t> next{0};
  parallelFor(workers, workers, [&](int64_t worker) {
    for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      try {
        checkCancel(options);
        task(i, int(worker));
      } catch (...) {
        next.store(count);  // the other workers stop too
        throw;
      }
    }
  });
}

// Phase 1: Stage 1 (block statistics are cached per head, geometry and smooth_k).
void CpuEngine::runStage1(EntryResult& result, const std::vector<int64_t>& heads, const RunOptions& options) {
  const RunConfig& config = result.config;
  const EntryInfo& info = entry_->info;
  const int nq = int(ceilDiv(info.tokensQ, config.geometry.blockQ));
  const int nk = int(ceilDiv(info.tokensKV, config.geometry.blockK));
  spread(int64_t(result.heads.size()), options, [&](int64_t t, int) {
    HeadResult& hr = result.heads[size_t(t)];
    hr.batch = t / int64_t(heads.size());
    hr.head = heads[size_t(t) % heads.size()];
    hr.params = config.forHead(hr.head);
    hr.nq = nq;
    hr.nk = nk;
    if (config.method != Method::SpargeAttn)
      return predictHead(hr, *entry_, config, blockValidity(config.geometry), methodStats_);
    const BlockStats& st = blockStats(hr.batch, hr.head, config.geometry, config.smoothK);
    Stage1Mask m = selectBlocks(st, hr.params, {config.sink, config.diagonal}, info.tokensQ, info.tokensKV);
    hr.blockMask = std::move(m.mask);
    hr.reasons = std::move(m.reasons);
    hr.pooledProb = std::move(m.pooledProb);
    hr.similarQ = std::move(m.similarQ);
    hr.similarK = std::move(m.similarK);
    hr.selfSimQ = st.selfSimQ;
    hr.selfSimK = st.selfSimK;
  });
}

// The passes of heads [first, last): the deployed run, plus with errors the same mask in exact numerics
// (unless deferred) and the dense outputs not cached yet; with `split`, the exact sparse run alone. Then each
// head's operands, in parallel.
void CpuEngine::planPasses(EntryResult& result, int64_t first, int64_t last, const RunOptions& options,
                           bool split) {
  const RunConfig& config = result.config;
  const Geometry& g = config.geometry;
  const std::vector<uint8_t>& valid = blockValidity(g).valid;
  for (int64_t t = first; t < last; ++t) {
    HeadWork& w = *ws_->heads[size_t(t - first)];
    const HeadResult& hr = result.heads[size_t(t)];
    const Numerics numerics = config.numericsFor(hr.head);  // a head may run exact (the exact fallback)
    const bool quant = numerics != Numerics::None;
    w.operands = operands(hr.batch, hr.head, blockStats(hr.batch, hr.head, g, config.smoothK));
    w.cachedRef = cachedReference({hr.batch, hr.head, g.blockQ, g.blockK});
    w.cachedQuantDense =
        cachedQuantDense({hr.batch, hr.head, g.blockQ, g.blockK, numerics, config.smoothK, false});
    // The INT8 Q·Kᵀ part is measured on request only (one cached by an earlier run is not reported).
    w.cachedQuantQk =
        options.quantBreakdown
            ? cachedQuantDense({hr.batch, hr.head, g.blockQ, g.blockK, numerics, config.smoothK, true})
            : nullptr;
    const double lambda = hr.params.dense ? kNoSkip : hr.params.lambda;  // a dense head never skips PV
    const PassSpec sparse{Numerics::None, hr.blockMask.data(), lambda, false};
    w.runsSparse = options.computeError && quant && (split || !ws_->deferSplit);
    w.runsReference = options.computeError && !split && !w.cachedRef;
    w.runsQuantDense = options.computeError && quant && !split && !w.cachedQuantDense;
    w.runsQuantQk = options.computeError && quant && options.quantBreakdown && !split && !w.cachedQuantQk;
    w.passes.clear();
    w.outs.clear();
    w.histories.clear();
    w.deployedPass = w.sparsePass = w.referencePass = w.quantDensePass = w.quantQkPass = -1;
    auto add = [&](int& index, const PassSpec& spec, AttentionOutput& out, TileHistory* history) {
      index = int(w.passes.size());
      w.passes.push_back(spec);
      w.outs.push_back(&out);
      w.histories.push_back(keepTiles_ ? history : nullptr);
    };
    if (!split)
      add(w.deployedPass, {numerics, hr.blockMask.data(), lambda, false}, w.deployed, &w.deployedTiles);
    if (w.runsSparse) add(w.sparsePass, sparse, w.exactSparse, &w.sparseTiles);
    if (w.runsReference)
      add(w.referencePass, {Numerics::None, valid.data(), kNoSkip, true}, w.reference, nullptr);
    if (w.runsQuantDense)
      add(w.quantDensePass, {numerics, valid.data(), kNoSkip, false}, w.quantDense, nullptr);
    if (w.runsQuantQk)
      add(w.quantQkPass, {numerics, valid.data(), kNoSkip, false, true}, w.quantQkDense, nullptr);
  }
  spread(last - first, options, [&](int64_t s, int) {
    HeadWork& w = *ws_->heads[size_t(s)];
    const HeadResult& hr = result.heads[size_t(first + s)];
    w.stage2.prepare(w.operands, g, w.passes, w.outs, {entryCount_, hr.batch, hr.head, g, config.smoothK},
                     w.histories);
  });
}

// Every query tile of the heads in the workspace's first `count` slots, the costliest first, over the
// workers.
void CpuEngine::runTiles(int64_t first, int64_t last, const RunOptions& options) {
  std::vector<std::pair<int64_t, int>>& order = ws_->order;
  order.clear();
  for (int64_t s = 0; s < last - first; ++s)
    for (int i = 0; i < ws_->heads[size_t(s)]->stage2.tiles(); ++i)
      if (ws_->heads[size_t(s)]->stage2.tileRuns(i)) order.emplace_back(s, i);
  auto cost = [&](const std::pair<int64_t, int>& a) {
    return ws_->heads[size_t(a.first)]->stage2.tileCost(a.second);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const auto& a, const auto& b) { return cost(a) > cost(b); });
  ws_->scratch.resize(size_t(threads_));
  spread(int64_t(order.size()), options, [&](int64_t k, int worker) {
    const auto [s, i] = order[size_t(k)];
    ws_->heads[size_t(s)]->stage2.runTile(i, ws_->scratch[size_t(worker)]);
  });
  for (int64_t s = 0; s < last - first; ++s) ws_->heads[size_t(s)]->stage2.finish();
}

// The error sums of every query tile against the reference, of the outputs of the current phase: only of the
// tiles that ran, or whose sums are not of their rows yet.
void CpuEngine::compareOutputs(EntryResult& result, int64_t first, int64_t last) {
  const int64_t dv = entry_->info.headDimV, nQ = entry_->info.tokensQ;
  const int blockQ = result.config.geometry.blockQ;
  const int nq = int(ceilDiv(nQ, blockQ));
  for (int64_t s = 0; s < last - first; ++s) {
    HeadWork& w = *ws_->heads[size_t(s)];
    for (auto* v : {&w.vsDeployed, &w.vsSparse, &w.vsQuantDense, &w.vsQuantQk}) v->resize(size_t(nq));
    for (auto* v : {&w.deployedCompared, &w.sparseCompared}) v->resize(size_t(nq), 0);
  }
  const tile::Kernels& kern = tile::kernels();
  // A pass's tile is compared again when it ran, or when its sums are not of its current rows yet.
  auto due = [](const HeadWork& w, int pass, std::vector<uint8_t>& compared, int i) {
    if (pass < 0) return false;
    if (w.stage2.passRuns(size_t(pass), i)) compared[size_t(i)] = 0;
    return compared[size_t(i)] == 0;
  };
  spread((last - first) * nq, RunOptions{}, [&](int64_t k, int) {
    HeadWork& w = *ws_->heads[size_t(k / nq)];
    const int i = int(k % nq);
    const int64_t r0 = int64_t(i) * blockQ, r1 = std::min<int64_t>(nQ, r0 + blockQ);
    const size_t at = size_t(r0 * dv), n = size_t((r1 - r0) * dv);
    const float* ref = w.referenceData() + at;
    if (due(w, w.deployedPass, w.deployedCompared, i)) {
      w.vsDeployed[size_t(i)] = kern.compare(w.deployed.out.data() + at, ref, n);
      w.deployedCompared[size_t(i)] = 1;
    }
    if (due(w, w.sparsePass, w.sparseCompared, i)) {
      w.vsSparse[size_t(i)] = kern.compare(w.exactSparse.out.data() + at, ref, n);
      w.sparseCompared[size_t(i)] = 1;
    }
    if (w.quantDensePass >= 0) w.vsQuantDense[size_t(i)] = kern.compare(w.quantDense.out.data() + at, ref, n);
    if (w.quantQkPass >= 0) w.vsQuantQk[size_t(i)] = kern.compare(w.quantQkDense.out.data() + at, ref, n);
  });
}

// What Stage 2 gave heads [first, last) into their results; the dense outputs computed here into the caches.
void CpuEngine::collectHeads(EntryResult& result, int64_t first, int64_t last, const RunOptions& options,
                             bool split) {
  const RunConfig& config = result.config;
  const Geometry& g = config.geometry;
  const BlockValidity& validity = blockValidity(g);
  const int64_t count = entry_->info.tokensQ * entry_->info.headDimV;
  for (int64_t t = first; t < last; ++t) {
    HeadWork& w = *ws_->heads[size_t(t - first)];
    HeadResult& hr = result.heads[size_t(t)];
    bool nonFinite = w.runsSparse && w.exactSparse.nonFinite;
    if (w.runsSparse) hr.errorSparse = sumTiles(w.vsSparse, count, &nonFinite, nullptr);
    if (!split) {
      nonFinite = nonFinite || w.deployed.nonFinite;
      hr.pvSkipped = w.deployed.pvSkipped;  // copied: its kept tiles serve the next run
      hr.emptyRows = w.deployed.emptyRows;
      ws_->zeroVChannels[size_t(t)] = w.deployed.zeroVChannels;
      // Exact denominators: only blocks holding a valid token pair count, by block and by token area.
      hr.sparsity = countSparsity(validity, hr.blockMask.data(), hr.pvSkipped.data());
      if (options.keepOutput) hr.output = w.deployed.out;
      if (options.computeError) nonFinite = errorsOfDeployed(hr, w, config) || nonFinite;
    }
    hr.hasNonFinite = hr.hasNonFinite || nonFinite;
    if (options.computeError) poisonErrors(hr);
  }
}

// The deployed error and the quantization-alone error of a head (the dense outputs of this run into the
// caches first). Returns whether a dense output holds non-finite values.
bool CpuEngine::errorsOfDeployed(HeadResult& hr, HeadWork& w, const RunConfig& config) {
  const Geometry& g = config.geometry;
  const int64_t count = entry_->info.tokensQ * entry_->info.headDimV;
  auto store = [&](auto& cache, const auto& key, AttentionOutput& a, const ErrorSums& vsRef) {
    auto d = std::make_unique<DenseOutput>();
    d->out = std::move(a.out);
    d->blockMass = std::move(a.blockMass);
    d->nonFinite = a.nonFinite;
    d->vsReference = vsRef;
    std::lock_guard<std::mutex> lock(cacheMutex_);
    auto& slot = cache[key];
    if (!slot) slot = std::move(d);
    return static_cast<const DenseOutput*>(slot.get());
  };
  const Numerics numerics = config.numericsFor(hr.head);
  auto storeQuant = [&](AttentionOutput& a, const std::vector<tile::CompareSums>& tiles, bool exactPv) {
    bool nonFinite = false;
    const ErrorSums e = sumTiles(tiles, count, &nonFinite, nullptr);
    a.nonFinite = a.nonFinite || nonFinite;
    const QuantDenseKey key{hr.batch, hr.head, g.blockQ, g.blockK, numerics, config.smoothK, exactPv};
    return store(quantDense_, key, a, e);
  };
  if (w.runsQuantDense) w.cachedQuantDense = storeQuant(w.quantDense, w.vsQuantDense, false);
  if (w.runsQuantQk) w.cachedQuantQk = storeQuant(w.quantQkDense, w.vsQuantQk, true);
  if (w.runsReference)
    w.cachedRef = store(references_, ReferenceKey{hr.batch, hr.head, g.blockQ, g.blockK}, w.reference, {});
  bool nonFinite = w.cachedRef->nonFinite;
  hr.refBlockMass = w.cachedRef->blockMass;
  hr.error = sumTiles(w.vsDeployed, count, &nonFinite, &hr.qBlockL1);
  if (numerics == Numerics::None) {
    hr.errorSparse = hr.error;
    hr.errorQuant = ErrorSums{};
  } else {
    nonFinite = nonFinite || w.cachedQuantDense->nonFinite;
    hr.errorQuant = w.cachedQuantDense->vsReference;
    if (w.cachedQuantQk) {
      nonFinite = nonFinite || w.cachedQuantQk->nonFinite;
      hr.errorQuantQk = w.cachedQuantQk->vsReference;
    }
  }
  return nonFinite;
}

// The buffers of heads [first, last) into the workspace's slots: each head gets back those of its last run
// (with what their tiles hold), while at most `capacity` heads' buffers are kept.
void CpuEngine::assignWork(const EntryResult& result, int64_t first, int64_t last, int64_t capacity) {
  const int64_t stamp = ++ws_->groups;
  auto& byHead = ws_->byHead;
  int64_t missing = 0;
  for (int64_t t = first; t < last; ++t) {
    const HeadResult& hr = result.heads[size_t(t)];
    auto it = byHead.find({hr.batch, hr.head});
    if (it == byHead.end())
      ++missing;
    else
      it->second->group = stamp;
  }
  for (auto it = byHead.begin(); it != byHead.end() && int64_t(byHead.size()) + missing > capacity;)
    it = it->second->group == stamp ? std::next(it) : byHead.erase(it);
  ws_->heads.clear();
  for (int64_t t = first; t < last; ++t) {
    const HeadResult& hr = result.heads[size_t(t)];
    std::unique_ptr<HeadWork>& w = byHead[{hr.batch, hr.head}];
    if (!w) w = std::make_unique<HeadWork>();
    w->group = stamp;
    ws_->heads.push_back(w.get());
  }
}

// Stage 2 over every head, in groups whose operands and outputs stay within a bounded workspace (at least
// one head a thread): a small entry runs in one group, a large one does not hold every head's buffers.
void CpuEngine::runGroups(EntryResult& result, const RunOptions& options, bool split) {
  const EntryInfo& info = entry_->info;
  const int64_t tasks = int64_t(result.heads.size());
  const double width = double(std::max(info.headDim, info.headDimV));
  const double headBytes = 4.0 * width * (10.0 * double(info.tokensKV) + 3.0 * double(info.tokensQ));
  constexpr double kGroupBytes = 256.0 * 1024 * 1024;
  const int64_t group =
      std::clamp<int64_t>(int64_t(kGroupBytes / headBytes), threads_, std::max<int64_t>(tasks, threads_));
  ws_->zeroVChannels.resize(size_t(tasks));
  double prepareMs = 0, sparseMs = 0, metricsMs = 0;
  for (int64_t first = 0; first < tasks; first += group) {
    const int64_t last = std::min(tasks, first + group);
    assignWork(result, first, last, group);
    auto t0 = Clock::now();
    planPasses(result, first, last, options, split);
    prepareMs += msSince(t0);
    t0 = Clock::now();
    runTiles(first, last, options);
    sparseMs += msSince(t0);
    t0 = Clock::now();
    if (options.computeError) compareOutputs(result, first, last);
    collectHeads(result, first, last, options, split);
    metricsMs += msSince(t0);
    for (int64_t s = 0; s < last - first; ++s)
      result.times.referenceInSparse = result.times.referenceInSparse || ws_->heads[size_t(s)]->runsReference;
  }
  StageTimes& times = result.times;
  if (split) {
    // As the CUDA engine reports it: the exact-numerics pass behind the split counts as metrics.
    times.metricsMs += prepareMs + sparseMs + metricsMs;
    return;
  }
  if (result.config.numerics != Numerics::None || result.config.mixedNumerics())
    times.quantizeMs = prepareMs;
  else
    sparseMs += prepareMs;
  times.sparseMs = sparseMs;
  times.metricsMs = options.computeError ? metricsMs : 0.0;
}

void CpuEngine::finishResult(EntryResult& result) const {
  const EntryInfo& info = entry_->info;
  result.warnings.clear();
  std::optional<int64_t> windowRows;  // counted once, when a head has empty rows
  for (size_t t = 0; t < result.heads.size(); ++t) {
    const HeadResult& hr = result.heads[t];
    const std::string head =
        "head " + std::to_string(hr.head) + (info.batch > 1 ? " batch " + std::to_string(hr.batch) : "");
    if (hr.emptyRows > 0) {
      if (!windowRows) windowRows = rowsWithoutKeys(info);
      result.warnings.push_back(emptyRowsWarning(result, hr, *windowRows));
    }
    const std::vector<int64_t>& zero = ws_->zeroVChannels[t];
    if (!zero.empty()) {
      std::string list;
      for (int64_t c : zero) list += (list.empty() ? "" : ", ") + std::to_string(c);
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
}

// Whether every dense output the heads' errors need is cached already.
bool CpuEngine::denseCached(const EntryResult& result, const RunOptions& options) {
  const RunConfig& config = result.config;
  const Geometry& g = config.geometry;
  for (const HeadResult& hr : result.heads) {
    const Numerics n = config.numericsFor(hr.head);
    if (!cachedReference({hr.batch, hr.head, g.blockQ, g.blockK})) return false;
    if (n == Numerics::None) continue;
    if (!cachedQuantDense({hr.batch, hr.head, g.blockQ, g.blockK, n, config.smoothK, false})) return false;
    if (options.quantBreakdown &&
        !cachedQuantDense({hr.batch, hr.head, g.blockQ, g.blockK, n, config.smoothK, true}))
      return false;
  }
  return true;
}

EntryResult CpuEngine::run(const RunConfig& config, const RunOptions& options) {
  std::lock_guard<std::mutex> runLock(runMutex_);
  if (!entry_) throw Error("cpu engine", "no entry loaded: open a capture and select an entry first");
  const EntryInfo& info = entry_->info;
  const std::vector<int64_t> heads = resolveRunHeads(info, config, options.heads);
  EntryResult result;
  result.info = info;
  result.config = config;
  result.engine = name();
  result.heads.resize(size_t(info.batch) * heads.size());
  const auto tStart = Clock::now();

  auto t0 = Clock::now();
  runStage1(result, heads, options);
  result.times.predictMs = msSince(t0);

  // Quantized numerics for a viewer whose dense outputs are cached: the deployed figures go out before the
  // exact-numerics runs behind the split (RunOptions::onDeployed).
  const bool quant = config.numerics != Numerics::None || config.mixedNumerics();
  ws_->deferSplit = quant && options.computeError && options.onDeployed && denseCached(result, options);
  runGroups(result, options, false);
  result.times.referenceMs = 0.0;
  result.times.referenceCached = options.computeError && !result.times.referenceInSparse;
  result.times.totalMs = msSince(tStart);
  result.times.clock = "wall";
  finishResult(result);
  if (!ws_->deferSplit) return result;

  result.splitPending = true;
  auto shown = std::make_shared<const EntryResult>(std::move(result));
  if (!options.onDeployed(shown)) return withoutHeads(*shown);
  EntryResult full = *shown;
  full.splitPending = false;
  runGroups(full, options, true);
  full.times.totalMs = msSince(tStart);
  finishResult(full);
  return full;
}

}  // namespace sparge::core
