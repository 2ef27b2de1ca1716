// Aggregation of per-head counts and error sums, parameter validation, small parsers.
#include "sparge/core/result.h"

#include <cmath>

#include "sparge/core/engine.h"
#include "sparge/core/error.h"
#include "sparge/core/params.h"

namespace sparge::core {

SparsityCounts& SparsityCounts::operator+=(const SparsityCounts& o) {
  validBlocks += o.validBlocks;
  selectedBlocks += o.selectedBlocks;
  computedPvBlocks += o.computedPvBlocks;
  skippedPvBlocks += o.skippedPvBlocks;
  validArea += o.validArea;
  selectedArea += o.selectedArea;
  computedPvArea += o.computedPvArea;
  return *this;
}

StageTimes& StageTimes::operator+=(const StageTimes& o) {
  predictMs += o.predictMs;
  quantizeMs += o.quantizeMs;
  sparseMs += o.sparseMs;
  referenceMs += o.referenceMs;
  metricsMs += o.metricsMs;
  totalMs += o.totalMs;
  referenceCached = referenceCached && o.referenceCached;
  hostMs += o.hostMs;
  hostQueueMs += o.hostQueueMs;
  hostWaitMs += o.hostWaitMs;
  hostResultsMs += o.hostResultsMs;
  copyMs += o.copyMs;
  copyBytes += o.copyBytes;
  return *this;
}

double ErrorSums::cosSim() const {
  if (normO <= 0 || normRef <= 0) return (normO <= 0 && normRef <= 0) ? 1.0 : 0.0;
  return dot / (std::sqrt(normO) * std::sqrt(normRef));
}

double ErrorSums::rmse() const {
  return count > 0 ? std::sqrt(sqDiff / double(count)) : 0.0;
}

ErrorSums& ErrorSums::operator+=(const ErrorSums& o) {
  absDiff += o.absDiff;
  absRef += o.absRef;
  dot += o.dot;
  normO += o.normO;
  normRef += o.normRef;
  sqDiff += o.sqDiff;
  count += o.count;
  return *this;
}

const HeadResult* EntryResult::find(int64_t batch, int64_t head) const {
  for (const HeadResult& h : heads)
    if (h.batch == batch && h.head == head) return &h;
  return nullptr;
}

void aggregate(EntryResult& r) {
  r.sparsity = {};
  r.error = {};
  r.errorSparse = {};
  r.errorQuant = {};
  for (const HeadResult& h : r.heads) {
    r.sparsity += h.sparsity;
    r.error += h.error;
    r.errorSparse += h.errorSparse;
    r.errorQuant += h.errorQuant;
  }
}

EngineChoice parseEngineChoice(const std::string& text) {
  if (text == "auto") return EngineChoice::Auto;
  if (text == "cpu") return EngineChoice::Cpu;
  if (text == "cuda") return EngineChoice::Cuda;
  throw Error("--engine", "unknown engine '" + text + "': use auto, cpu or cuda");
}

double Engine::runDenseBaseline(const std::string& name) {
  throw Error(this->name(), "no dense baseline '" + name + "' on this engine");
}

}  // namespace sparge::core
