// The block-predictor interface: from one head's Q and K, the entry's mask semantics (causal, window, GQA)
// and the tile geometry, a method produces the block mask Stage 2 walks. SpargeAttn's Stage 1 (stage1.h) is
// one implementation, the methods of method.h the others (docs/methods.md).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "sparge/core/capture.h"
#include "sparge/core/params.h"
#include "sparge/core/stage1.h"

namespace sparge::core {

// One query head's inputs. Q and K are float32 holding values of `dtype` (float32 captures are predicted in
// float16, as the GPU holds them); with GQA, `k` is the KV head the query head reads.
struct PredictInput {
  const float* q = nullptr;  // [nQ, d]
  const float* k = nullptr;  // [nKv, d]
  int64_t nQ = 0, nKv = 0, d = 0;
  DType dtype = DType::Float16;
  Geometry geometry;
  bool causal = false;
  Window window;
  // The entry's softmax scale: the line and antidiagonal scores use it where the methods' reference code
  // writes D^-1/2 (the same number for most models; not for captures of models that pre-scale Q and K).
  double scale = 0;
  bool smoothK = true;                      // SpargeAttn's K smoothing (the other methods ignore it)
  const BlockValidity* validity = nullptr;  // of `geometry` for this entry (computeBlockValidity)
};

// What a method computes from the data alone, independent of the thresholds that the tuner and the sliders
// move, so that engines compute it once per head and reuse it for every run.
struct PredictorStats {
  virtual ~PredictorStats() = default;
};

class Predictor {
 public:
  virtual ~Predictor() = default;
  virtual Method method() const = 0;
  // The parameters the statistics depend on, folded into one number (XAttention: its stride; otherwise 0).
  virtual int64_t statsKey(const HeadParams&) const { return 0; }
  virtual std::unique_ptr<PredictorStats> computeStats(const PredictInput& in, const HeadParams& p) const = 0;
  // The mask, reasons and per-block scores (Stage1Mask::pooledProb holds the method's own score, see
  // docs/methods.md) for `p`; dense heads, the sink, the diagonal and validity as in SpargeAttn's final mask.
  virtual Stage1Mask select(const PredictorStats& stats, const PredictInput& in, const HeadParams& p,
                            const ForcedBlocks& forced) const = 0;

  Stage1Mask predict(const PredictInput& in, const HeadParams& p, const ForcedBlocks& forced) const {
    return select(*computeStats(in, p), in, p, forced);
  }
};

// The predictor of `m` (a static instance).
const Predictor& predictorFor(Method m);

// Statistics cached per (batch, query head, geometry, smooth-K, method, statsKey), shared by threads.
class PredictorCache {
 public:
  const PredictorStats& get(int64_t batch, int64_t head, const PredictInput& in, const Predictor& predictor,
                            const HeadParams& p);
  void clear();

 private:
  using Key = std::tuple<int64_t, int64_t, int, int, bool, int, int64_t>;
  std::mutex mutex_;
  std::map<Key, std::unique_ptr<PredictorStats>> stats_;
};

// Stage 1 of query head `head`, batch item `batch` of `entry` with config.method (any but SpargeAttn, whose
// engines keep their own path): fills hr's mask, reasons, pooledProb (the method's block score) and
// elementPairs, with the statistics from `cache`.
void predictHead(HeadResult& hr, const EntryData& entry, const RunConfig& config,
                 const BlockValidity& validity, PredictorCache& cache);

}  // namespace sparge::core
