// SpargeAttn's Stage 1 as a Predictor, the predictor of each method, and the engines' statistics cache.
#include "sparge/core/predictor.h"

#include "method_predictors.h"
#include "sparge/core/error.h"

namespace sparge::core {
namespace {

struct SpargeStats : PredictorStats {
  BlockStats stats;
};

// Stage 1 of docs/method.md, unchanged: block statistics, then selectBlocks.
class SpargeAttnPredictor : public Predictor {
 public:
  Method method() const override { return Method::SpargeAttn; }
  std::unique_ptr<PredictorStats> computeStats(const PredictInput& in, const HeadParams&) const override {
    auto s = std::make_unique<SpargeStats>();
    s->stats = computeBlockStats(in.q, in.nQ, in.k, in.nKv, in.d, in.dtype, in.geometry, in.smoothK,
                                 in.causal, in.window);
    return s;
  }
  Stage1Mask select(const PredictorStats& stats, const PredictInput& in, const HeadParams& p,
                    const ForcedBlocks& forced) const override {
    return selectBlocks(static_cast<const SpargeStats&>(stats).stats, p, forced, in.nQ, in.nKv);
  }
};

}  // namespace

const Predictor& predictorFor(Method m) {
  static const SpargeAttnPredictor sparge;
  switch (m) {
    case Method::SpargeAttn:
      return sparge;
    case Method::XAttention:
      return methods::xattentionPredictor();
    case Method::MInference:
      return methods::minferencePredictor();
    case Method::FlexPrefill:
      return methods::flexprefillPredictor();
    case Method::Moba:
      return methods::mobaPredictor();
  }
  throw Error("predictor", "unknown method");
}

const PredictorStats& PredictorCache::get(int64_t batch, int64_t head, const PredictInput& in,
                                          const Predictor& predictor, const HeadParams& p) {
  const Key key{batch,
                head,
                in.geometry.blockQ,
                in.geometry.blockK,
                in.smoothK,
                int(predictor.method()),
                predictor.statsKey(p)};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = stats_.find(key);
    if (it != stats_.end()) return *it->second;
  }
  std::unique_ptr<PredictorStats> fresh = predictor.computeStats(in, p);
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = stats_[key];
  if (!slot) slot = std::move(fresh);
  return *slot;
}

void predictHead(HeadResult& hr, const EntryData& entry, const RunConfig& config,
                 const BlockValidity& validity, PredictorCache& cache) {
  const EntryInfo& info = entry.info;
  PredictInput in;
  in.q = entry.qHead(hr.batch, hr.head);
  in.k = entry.kHead(hr.batch, info.kvHeadOf(hr.head));
  in.nQ = info.tokensQ;
  in.nKv = info.tokensKV;
  in.d = info.headDim;
  in.dtype = info.dtype;
  in.geometry = config.geometry;
  in.causal = info.causal;
  in.window = info.window;
  in.scale = info.scale;
  in.smoothK = config.smoothK;
  in.validity = &validity;
  const Predictor& predictor = predictorFor(config.method);
  Stage1Mask m = predictor.select(cache.get(hr.batch, hr.head, in, predictor, hr.params), in, hr.params,
                                  {config.sink, config.diagonal});
  hr.blockMask = std::move(m.mask);
  hr.reasons = std::move(m.reasons);
  hr.pooledProb = std::move(m.pooledProb);
  hr.elementPairs = m.elementPairs;
}

void PredictorCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.clear();
}

}  // namespace sparge::core
