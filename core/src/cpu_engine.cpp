// CpuEngine: runs Stage 1, Stage 2, the cached dense reference and the error metrics per head, in
// phases (predict, sparse, reference, metrics) so that each phase's wall time is measured on its own.
#include "sparge/core/cpu_engine.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "parallel.h"
#include "sparge/core/error.h"
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

}  // namespace

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
  stats_.clear();
  validity_.clear();
}

const BlockStats& CpuEngine::blockStats(int64_t b, int64_t h, const Geometry& g, bool smoothK, double*) {
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

const CpuEngine::Reference& CpuEngine::reference(int64_t b, int64_t h, const Geometry& g, double*) {
  const auto key = std::make_tuple(b, h, g.blockQ, g.blockK);
  {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    auto it = references_.find(key);
    if (it != references_.end()) return *it->second;
  }
  const EntryInfo& info = entry_->info;
  // The dense reference: every causally valid block, no skipping.
  const std::vector<uint8_t>& all = blockValidity(g).valid;
  const int64_t hk = info.kvHeadOf(h);
  AttentionOutput o =
      blockSparseAttention(entry_->qHead(b, h), entry_->kHead(b, hk), entry_->vHead(b, hk), info.tokensQ,
                           info.tokensKV, info.headDim, info.headDimV, info.scale, info.causal, g, all.data(),
                           std::numeric_limits<double>::infinity(),
                           /*wantBlockMass=*/true);
  auto ref = std::make_unique<Reference>();
  ref->out = std::move(o.out);
  ref->blockMass = std::move(o.blockMass);
  std::lock_guard<std::mutex> lock(cacheMutex_);
  auto& slot = references_[key];
  if (!slot) slot = std::move(ref);
  return *slot;
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
    const BlockStats& st = blockStats(hr.batch, hr.head, g, config.smoothK, nullptr);
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

  // Phase 2: Stage 2, block-sparse attention with the PV skip. A dense head never skips PV.
  t0 = Clock::now();
  const BlockValidity& validity = blockValidity(g);
  std::vector<std::vector<float>> outputs(tasks);
  parallelFor(tasks, threads_, [&](int64_t t) {
    checkCancel(options);
    HeadResult& hr = result.heads[t];
    const int64_t hk = info.kvHeadOf(hr.head);
    const double lambda = hr.params.dense ? std::numeric_limits<double>::infinity() : hr.params.lambda;
    AttentionOutput o =
        blockSparseAttention(entry_->qHead(hr.batch, hr.head), entry_->kHead(hr.batch, hk),
                             entry_->vHead(hr.batch, hk), info.tokensQ, info.tokensKV, info.headDim,
                             info.headDimV, info.scale, info.causal, g, hr.blockMask.data(), lambda, false);
    hr.pvSkipped = std::move(o.pvSkipped);
    hr.emptyRows = o.emptyRows;
    outputs[t] = std::move(o.out);
    // Exact denominators: only blocks holding a valid token pair count, by block and by token area.
    hr.sparsity = countSparsity(validity, hr.blockMask.data(), hr.pvSkipped.data());
  });
  result.times.sparseMs = msSince(t0);

  // Phase 3: the dense fp32 reference, computed once per (head, geometry) and cached.
  if (options.computeError) {
    bool allCached = true;
    {
      std::lock_guard<std::mutex> lock(cacheMutex_);
      for (const HeadResult& hr : result.heads)
        if (!references_.count(std::make_tuple(hr.batch, hr.head, g.blockQ, g.blockK))) allCached = false;
    }
    t0 = Clock::now();
    parallelFor(tasks, threads_, [&](int64_t t) {
      checkCancel(options);
      reference(result.heads[t].batch, result.heads[t].head, g, nullptr);
    });
    result.times.referenceMs = allCached ? 0.0 : msSince(t0);
    result.times.referenceCached = allCached;

    // Phase 4: error metrics against the reference.
    t0 = Clock::now();
    parallelFor(tasks, threads_, [&](int64_t t) {
      HeadResult& hr = result.heads[t];
      const Reference& ref = reference(hr.batch, hr.head, g, nullptr);
      hr.refBlockMass = ref.blockMass;
      hr.qBlockL1.assign(nq, 0.0f);
      const std::vector<float>& o = outputs[t];
      ErrorSums& e = hr.error;
      const int64_t dv = info.headDimV;
      for (int i = 0; i < nq; ++i) {
        double blockDiff = 0, blockRef = 0;
        const int64_t r0 = int64_t(i) * g.blockQ, r1 = std::min<int64_t>(info.tokensQ, r0 + g.blockQ);
        for (int64_t x = r0 * dv; x < r1 * dv; ++x) {
          const double a = o[x], b = ref.out[x];
          if (!std::isfinite(a) || !std::isfinite(b)) hr.hasNonFinite = true;
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
        hr.qBlockL1[i] = blockRef > 0 ? float(blockDiff / blockRef) : 0.0f;
      }
      e.count = int64_t(o.size());
    });
    result.times.metricsMs = msSince(t0);
  }
  if (options.keepOutput)
    for (int64_t t = 0; t < tasks; ++t) result.heads[t].output = std::move(outputs[t]);
  result.times.totalMs = msSince(tStart);
  result.times.clock = "wall";
  for (const HeadResult& hr : result.heads) {
    if (hr.emptyRows > 0)
      result.warnings.push_back("head " + std::to_string(hr.head) + ": " + std::to_string(hr.emptyRows) +
                                " query rows see no key in their selected blocks (output set to 0; --sink "
                                "keeps key block 0 on for every row)");
    if (hr.hasNonFinite)
      result.warnings.push_back("head " + std::to_string(hr.head) + ": NaN/Inf in the output or reference");
  }
  aggregate(result);
  return result;
}

}  // namespace sparge::core
