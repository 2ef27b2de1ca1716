// The device block predictors' table and run (predictors.h).
#include "predictors/predictors.h"

#include <cmath>
#include <limits>
#include <string>

#include "predictors/line_methods.h"
#include "predictors/method_kernels.h"
#include "sparge/core/error.h"
#include "sparge/core/predictor.h"

namespace sparge::cuda::predictors {
namespace {

// One row per method with a device predictor.
constexpr DevicePredictor kPredictors[] = {
    {core::Method::XAttention, xattentionStats, xattentionSelect, true},
    {core::Method::Moba, nullptr, mobaSelect, false},
    {core::Method::MInference, nullptr, predictMInference, true},
    {core::Method::FlexPrefill, nullptr, predictFlexPrefill, true},
};

const DevicePredictor* find(core::Method m) {
  for (const DevicePredictor& p : kPredictors)
    if (p.method == m) return &p;
  return nullptr;
}

}  // namespace

bool hasDevicePredictor(core::Method m) {
  return find(m) != nullptr;
}

void MethodStage1::clearRows(const MethodRun& r, bool blocksWritten) {
  const Problem& p = r.problem;
  const cudaStream_t s = r.stream;
  const size_t BH = (size_t)p.B * p.Hq, grid = (size_t)p.nq * p.nk;
  selected_.reserve(BH * grid, "method selection");
  methodForced_.reserve(BH * grid, "method-forced blocks");
  score_.reserve(BH * grid * sizeof(float), "method scores");
  denseHead_.reserve(BH, "method dense heads");
  if (!blocksWritten) {
    check(cudaMemsetAsync(selected_.get(), 0, BH * grid, s), "memset");
    check(cudaMemsetAsync(methodForced_.get(), 0, BH * grid, s), "memset");
    check(cudaMemsetAsync(score_.get(), 0, BH * grid * sizeof(float), s), "memset");
  }
  check(cudaMemsetAsync(denseHead_.get(), 0, BH, s), "memset");
  if (elementPairs_.bytes() < BH * sizeof(double) || pairsOf_ != int(r.method)) {
    elementPairs_.reserve(BH * sizeof(double), "element pairs");  // NaN: the method counts blocks
    const std::vector<double> none(BH, std::numeric_limits<double>::quiet_NaN());
    check(cudaMemcpy(elementPairs_.get(), none.data(), BH * sizeof(double), cudaMemcpyHostToDevice),
          "element pairs");
    pairsOf_ = int(r.method);
  }
}

const DeviceBuffer* MethodStage1::cachedStats(const DevicePredictor& dp, const MethodRun& r,
                                              const MethodLaunch& l, int64_t key) {
  if (!dp.stats) return nullptr;
  const Problem& p = r.problem;
  Cached& c = stats_[std::make_tuple(p.BQ, p.BK, int(r.method), key)];
  c.done.resize(size_t(p.Hq), 0);
  bool missing = false;
  for (int h : *l.heads) missing = missing || !c.done[size_t(h)];
  if (missing) {
    dp.stats(l, c.stats, scratch_);
    for (int h : *l.heads) c.done[size_t(h)] = 1;
  }
  return &c.stats;
}

void MethodStage1::run(const MethodRun& r, DeviceSelection& sel) {
  const DevicePredictor* dp = find(r.method);
  if (!dp)  // every method has one (a host test checks): this guards a method added to core alone
    throw Error("cuda engine", std::string("--method ") + core::toString(r.method) +
                                   " has no CUDA Stage 1: use --engine cpu");
  sel.reserveOutputs(r.problem);
  clearRows(r, dp->writesEveryBlock);
  // The heads grouped by the statistics they share (XAttention: its stride), all lists in one upload.
  const core::Predictor& cpu = core::predictorFor(r.method);
  std::map<int64_t, std::vector<int>> groups;
  for (int h : r.heads) groups[cpu.statsKey((*r.params)[size_t(h)])].push_back(h);
  std::vector<int> lists;
  for (const auto& [key, hs] : groups) lists.insert(lists.end(), hs.begin(), hs.end());
  if (lists != uploadedHeads_) {
    uploadHeads(heads_, lists);
    uploadedHeads_ = lists;
  }
  MethodRows rows{selected_.as<uint8_t>(), methodForced_.as<uint8_t>(), score_.as<float>(),
                  denseHead_.as<uint8_t>(), elementPairs_.as<double>()};
  FinishArgs fin{r.paramsDev,
                 r.forced,
                 sel.mask.as<uint8_t>(),
                 sel.reasons.as<uint8_t>(),
                 sel.prob.as<float>(),
                 sel.lut.as<int32_t>(),
                 sel.validCount.as<int32_t>()};
  size_t offset = 0;
  for (const auto& [key, hs] : groups) {
    MethodLaunch l;
    l.qkv = r.qkv;
    l.problem = r.problem;
    l.problem.heads = heads_.as<int>() + offset;
    l.problem.nHeads = int(hs.size());
    l.scale = r.scale;
    l.blockFlags = sel.blocks();
    l.params = r.params;
    l.stream = r.stream;
    l.heads = &hs;
    l.stats = cachedStats(*dp, r, l, key);
    dp->select(l, rows, scratch_);
    launchFinish(l, rows, fin);
    offset += hs.size();
  }
}

}  // namespace sparge::cuda::predictors
