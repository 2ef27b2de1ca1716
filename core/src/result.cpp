// Aggregation of per-head counts and error sums, parameter validation, small parsers.
#include "sparge/core/result.h"

#include <algorithm>
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
  r.errorQuantQk = {};
  for (const HeadResult& h : r.heads) {
    r.sparsity += h.sparsity;
    r.error += h.error;
    r.errorSparse += h.errorSparse;
    r.errorQuant += h.errorQuant;
    r.errorQuantQk += h.errorQuantQk;
  }
}

EntryResult joinHeadRuns(std::vector<EntryResult> parts) {
  if (parts.empty()) return {};
  EntryResult out = std::move(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    EntryResult& part = parts[i];
    for (HeadResult& h : part.heads) out.heads.push_back(std::move(h));
    for (std::string& w : part.warnings)
      if (std::find(out.warnings.begin(), out.warnings.end(), w) == out.warnings.end())
        out.warnings.push_back(std::move(w));
    out.times += part.times;
    out.splitPending = out.splitPending || part.splitPending;
  }
  std::sort(out.heads.begin(), out.heads.end(), [](const HeadResult& a, const HeadResult& b) {
    return a.batch != b.batch ? a.batch < b.batch : a.head < b.head;
  });
  aggregate(out);
  return out;
}

int64_t rowsWithoutKeys(const EntryInfo& info) {
  int64_t rows = 0;
  for (int64_t t = 0; t < info.tokensQ; ++t)
    if (visibleKeys(t, info.tokensKV, info.causal, info.window).empty()) ++rows;
  return rows;
}

namespace {

// What turns on a visible block in rows whose selection holds none; "" when nothing but more blocks would.
std::string emptySelectionFix(const EntryResult& r, const HeadParams& p) {
  if (p.dense) return "";
  // The sink's block 0 lies outside the window of every row beyond the window's left reach.
  if (!r.config.sink && r.info.window.left < 0) return "--sink keeps key block 0 on for every row";
  if (!r.config.diagonal) return "--diagonal (an extension) keeps the block holding each row's own key on";
  return p.mode == SelectMode::TopK ? "a larger top-k keeps more blocks" : "a larger τ keeps more blocks";
}

}  // namespace

std::string emptyRowsWarning(const EntryResult& r, const HeadResult& h, int64_t windowRows) {
  std::string text = "head " + std::to_string(h.head) +
                     (r.info.batch > 1 ? " batch " + std::to_string(h.batch) : std::string()) + ": ";
  const int64_t byWindow = std::min(windowRows, h.emptyRows);
  const int64_t bySelection = h.emptyRows - byWindow;
  if (byWindow > 0)
    text += std::to_string(byWindow) + " query rows have no key inside their " +
            (r.info.window.bounded() ? "window " + toString(r.info.window) : std::string("causal range")) +
            " (the entry has " + std::to_string(r.info.tokensKV) +
            " keys): their output is 0, as in dense attention";
  if (bySelection > 0) {
    const std::string fix = emptySelectionFix(r, h.params);
    text += std::string(byWindow > 0 ? "; " : "") + std::to_string(bySelection) +
            " query rows see no key in their selected blocks (output set to 0" +
            (fix.empty() ? "" : "; " + fix) + ")";
  }
  return text;
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

EntryResult withoutHeads(const EntryResult& shown) {
  EntryResult r;
  r.info = shown.info;
  r.config = shown.config;
  r.engine = shown.engine;
  r.times = shown.times;
  r.splitPending = true;
  return r;
}

}  // namespace sparge::core
