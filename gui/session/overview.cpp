#include "overview.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "background.h"
#include "sparge/core/error.h"

namespace sparge::gui {

const char* toString(OverviewMetric m) {
  switch (m) {
    case OverviewMetric::Stage1:
      return "stage-1 sparsity";
    case OverviewMetric::Total:
      return "total sparsity";
    case OverviewMetric::L1:
      return "L1 (deployed)";
    case OverviewMetric::L1Sparse:
      return "L1 of sparsity";
    case OverviewMetric::L1Quant:
      return "L1 of quantization";
    case OverviewMetric::QuantShare:
      return "quantization share";
    case OverviewMetric::Speedup:
      return "estimated speed-up";
    case OverviewMetric::Tuned:
      return "tuned";
    case OverviewMetric::OverBudget:
      return "over budget";
    case OverviewMetric::BestMethod:
      return "best method";
    case OverviewMetric::Count:
      break;
  }
  return "?";
}

const char* describe(OverviewMetric m) {
  switch (m) {
    case OverviewMetric::Stage1:
      return "valid blocks not selected by Stage 1 (exact denominators)";
    case OverviewMetric::Total:
      return "valid blocks whose PV product was not computed (Stage 1 and PV skip)";
    case OverviewMetric::L1:
      return "sum|O - Oref| / sum|Oref| of the deployed run: sparse, in the chosen numerics";
    case OverviewMetric::L1Sparse:
      return "the same mask and lambda in exact numerics: what sparsity alone costs";
    case OverviewMetric::L1Quant:
      return "every valid block, no skip, chosen numerics: what quantization alone costs";
    case OverviewMetric::QuantShare:
      return "l1_quant / (l1_sparse + l1_quant): how much of the error quantization causes";
    case OverviewMetric::Speedup:
      return "dense work / executed work (QK on selected blocks, PV on computed blocks); an upper bound, "
             "Stage 1 "
             "not included";
    case OverviewMetric::Tuned:
      return "the head has a tuner result";
    case OverviewMetric::OverBudget:
      return "deployed L1 above the budget (l1, or l2 with PV skip on)";
    case OverviewMetric::BestMethod:
      return "the block predictor that reaches the most sparsity within the budget, each tuned per head "
             "(Compare methods; docs/methods.md)";
    case OverviewMetric::Count:
      break;
  }
  return "";
}

bool isCategorical(OverviewMetric m) {
  return m == OverviewMetric::Tuned || m == OverviewMetric::OverBudget;
}

double cellValue(const OverviewCell& c, OverviewMetric metric, const core::EntryInfo& info,
                 const Budget& budget, bool tuned) {
  switch (metric) {
    case OverviewMetric::Stage1:
      return c.sparsity.stage1();
    case OverviewMetric::Total:
      return c.sparsity.total();
    case OverviewMetric::L1:
      return c.error.l1();
    case OverviewMetric::L1Sparse:
      return measuredL1(c.errorSparse);
    case OverviewMetric::L1Quant:
      return measuredL1(c.errorQuant);
    case OverviewMetric::QuantShare:
      return quantShare(c.errorSparse, c.errorQuant);
    case OverviewMetric::Speedup:
      return estimatedSpeedup(c.sparsity, info.headDim, info.headDimV);
    case OverviewMetric::Tuned:
      return tuned ? 1.0 : 0.0;
    case OverviewMetric::OverBudget:
      return overBudget(c.sparsity, c.error, budget) ? 1.0 : 0.0;
    case OverviewMetric::BestMethod:
      return NAN;  // not a figure of the cell: the view reads MethodCompareController
    case OverviewMetric::Count:
      break;
  }
  return 0;
}

const char* toString(OverviewSort s) {
  switch (s) {
    case OverviewSort::Capture:
      return "capture order";
    case OverviewSort::Layer:
      return "layer";
    case OverviewSort::Step:
      return "step";
    case OverviewSort::Kind:
      return "module kind";
    case OverviewSort::Mask:
      return "mask (causal, window)";
    case OverviewSort::Metric:
      return "metric (mean over heads)";
  }
  return "?";
}

std::string groupOf(const core::EntryInfo& e, OverviewSort sort) {
  switch (sort) {
    case OverviewSort::Layer:
      return e.layer ? "layer " + std::to_string(*e.layer) : "no layer";
    case OverviewSort::Step:
      return e.step ? "step " + std::to_string(*e.step) : "no step";
    case OverviewSort::Kind: {
      std::string k = e.stack + (e.stack.empty() || e.kind.empty() ? "" : " ") + e.kind;
      return k.empty() ? "kind not recorded" : k;
    }
    case OverviewSort::Mask: {
      if (!e.window.bounded()) return e.causal ? "causal" : "full";
      std::string w =
          "window [" + std::to_string(e.window.left) + ", " + std::to_string(e.window.right) + "]";
      return e.causal ? w + " causal" : w;
    }
    default:
      return {};
  }
}

std::vector<size_t> overviewOrder(const std::vector<core::EntryInfo>& entries, OverviewSort sort,
                                  const std::vector<double>& metricMeans) {
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  constexpr int64_t kMissing = INT64_MAX;  // entries without the attribute go last
  auto key = [&](size_t i) -> std::pair<int64_t, std::string> {
    const auto& e = entries[i];
    switch (sort) {
      case OverviewSort::Layer:
        return {e.layer.value_or(kMissing), {}};
      case OverviewSort::Step:
        return {e.step.value_or(kMissing), {}};
      case OverviewSort::Kind:
      case OverviewSort::Mask:
        return {0, groupOf(e, sort)};
      default:
        return {0, {}};
    }
  };
  if (sort == OverviewSort::Metric) {
    auto mean = [&](size_t i) {
      double v = i < metricMeans.size() ? metricMeans[i] : NAN;
      return std::isnan(v) ? -INFINITY : v;
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return mean(a) > mean(b); });
  } else if (sort != OverviewSort::Capture) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  }
  return order;
}

int64_t OverviewController::maxHeads() const {
  int64_t n = 0;
  for (const auto& e : core_.capture.entries) n = std::max(n, e.headsQ);
  return n;
}

void OverviewController::setActive(bool on) {
  active_ = on;
  if (on) update();
}

void OverviewController::refresh() {
  for (auto& r : rows_) r.done = false;
  seenConfig_ = seenStored_ = ~uint64_t{0};
  if (active_) update();
}

void OverviewController::reset(ResetScope scope) {
  if (scope != ResetScope::Capture) return;  // rows do not depend on which entry is selected
  ++ticket_;
  filling_ = false;
  done_ = 0;
  rows_.clear();
  for (const auto& e : core_.capture.entries) {
    OverviewRow row;
    row.entry = e.name;
    rows_.push_back(std::move(row));
  }
  seenConfig_ = seenStored_ = ~uint64_t{0};
  ++generation_;
}

void OverviewController::showRows(std::vector<OverviewRow> rows) {
  rows_ = std::move(rows);
  for (size_t i = 0; i < rows_.size() && i < core_.capture.entries.size(); ++i) {
    rows_[i].config = configFor(core_.capture.entries[i]);
    rows_[i].done = true;
  }
  done_ = rows_.size();
  ++generation_;
}

core::RunConfig OverviewController::configFor(const core::EntryInfo& info) const {
  core::RunConfig c = runs_.config();
  if (info.name == core_.capture.entryName && core_.capture.loaded) return c;
  const auto* stored = tuning_.storedParams(info.name);
  c.perHead = stored && static_cast<int64_t>(stored->size()) == info.headsQ ? *stored
                                                                            : std::vector<core::HeadParams>{};
  const auto* exact = tuning_.storedExact(info.name);
  setExactHeads(c, exact && static_cast<int64_t>(exact->size()) == info.headsQ ? exact : nullptr);
  return c;
}

void OverviewController::update() {
  if (!active_ || rows_.size() != core_.capture.entries.size()) return;
  if (runs_.configGeneration() == seenConfig_ && tuning_.storedGeneration() == seenStored_) return;
  seenConfig_ = runs_.configGeneration();
  seenStored_ = tuning_.storedGeneration();
  bool changed = false;
  for (size_t i = 0; i < rows_.size(); ++i) {
    core::RunConfig c = configFor(core_.capture.entries[i]);
    if (rows_[i].done && sameConfig(c, rows_[i].config)) continue;
    rows_[i].stale = rows_[i].done || rows_[i].stale;
    rows_[i].done = false;
    rows_[i].config = std::move(c);
    changed = true;
  }
  if (changed || !filling_) startFill();
}

void OverviewController::startFill() {
  std::vector<size_t> todo;
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (!rows_[i].done) todo.push_back(i);
  }
  done_ = rows_.size() - todo.size();
  ++ticket_;
  core_.cancel(JobKind::Overview);
  filling_ = !todo.empty();
  if (todo.empty()) return;
  struct Item {
    std::vector<OverviewCell> cells;
    std::string error;
  };
  auto job = std::make_shared<SliceJob<Item>>();
  job->kind = JobKind::Overview;
  job->count = todo.size();
  uint64_t ticket = ticket_, epoch = core_.epoch;
  auto backend = core_.backend;
  std::vector<std::pair<std::string, core::RunConfig>> work;
  for (size_t i : todo) work.emplace_back(rows_[i].entry, rows_[i].config);
  job->current = [this, ticket, epoch] { return ticket == ticket_ && epoch == core_.epoch; };
  job->work = [backend, work](size_t k, const core::CancelFlag& cancel) {
    Item item;
    try {
      core::Engine& engine = backend->ensureOverviewEngine();
      auto data = backend->load(work[k].first);
      if (engine.entry() != data) engine.setEntry(data);
      core::RunOptions opt;
      opt.computeError = true;
      opt.cancel = &cancel;
      core::EntryResult r = engine.run(work[k].second, opt);
      for (int64_t h = 0; h < r.info.headsQ; ++h) item.cells.push_back(figuresOf(r, h));
    } catch (const core::Cancelled&) {
      throw;
    } catch (const std::exception& e) {
      item.error = e.what();  // one bad entry must not stop the others
    }
    return item;
  };
  job->apply = [this, todo](size_t k, Item item) {
    OverviewRow& row = rows_[todo[k]];
    row.heads = std::move(item.cells);
    row.error = std::move(item.error);
    row.done = true;
    row.stale = false;
    ++done_;
    ++generation_;
  };
  job->finished = [this] { filling_ = false; };
  runInSlices<Item>(core_, job, 0);
}

}  // namespace sparge::gui
