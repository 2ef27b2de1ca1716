// Comparing the block predictors over every entry of the capture, for the overview's best-method colours.
#include "method_compare.h"

#include "heat_colors.h"
#include "sparge/core/compare.h"
#include "sparge/core/error.h"

namespace sparge::gui {

uint32_t methodColor(core::Method m) {
  switch (m) {
    case core::Method::SpargeAttn:
      return packRgba(255, 127, 80, 240);
    case core::Method::XAttention:
      return packRgba(102, 204, 102, 240);
    case core::Method::MInference:
      return packRgba(204, 153, 255, 240);
    case core::Method::FlexPrefill:
      return packRgba(90, 170, 255, 240);
    case core::Method::Moba:
      return packRgba(240, 220, 90, 240);
  }
  return packRgba(128, 128, 128);
}

const MethodWinners* MethodCompareController::find(const std::string& entry) const {
  auto it = results_.find(entry);
  return it == results_.end() ? nullptr : &it->second;
}

void MethodCompareController::cancel() {
  if (!running_) return;
  ++ticket_;
  running_ = false;
  core_.cancel(JobKind::MethodCompare);
}

void MethodCompareController::reset(ResetScope scope) {
  if (scope != ResetScope::Capture) return;
  cancel();
  results_.clear();
  ++generation_;
}

void MethodCompareController::compareAll() {
  if (!core_.capture.loaded || core_.capture.entries.empty()) return;
  core::TuneOptions opt = tuneOptionsFor(runs_.config(), tuning_.budget());
  try {
    opt.validate("compare methods");
  } catch (const std::exception& e) {
    core_.messages.pushError(e.what());
    return;
  }
  cancel();
  results_.clear();
  done_ = 0;
  total_ = core_.capture.entries.size();
  running_ = true;
  ++generation_;
  const uint64_t ticket = ++ticket_, epoch = core_.epoch;
  std::vector<std::string> names;
  for (const core::EntryInfo& e : core_.capture.entries) names.push_back(e.name);
  auto job = [this, backend = core_.backend, names, opt, ticket, epoch](const core::CancelFlag& cancel) {
    const std::vector<core::Method> methods(std::begin(core::kAllMethods), std::end(core::kAllMethods));
    const auto variants = core::compareVariants({core::Permutation::None}, methods);
    core::TuneCallbacks cb;
    cb.cancel = &cancel;
    for (const std::string& name : names) {
      if (cancel.load()) break;
      const std::shared_ptr<const core::EntryData> data = backend->load(name);
      const core::CompareEntry e =
          core::compareEntry(backend->ensureOverviewEngine(), data, variants, opt, cb);
      MethodWinners w;
      for (const core::CompareHead& h : e.heads) {
        if (size_t(h.head) >= w.winner.size())
          w.winner.resize(size_t(h.head) + 1, -1), w.sparsity.resize(w.winner.size());
        w.winner[size_t(h.head)] = h.winner;
        for (const core::VariantHead& v : h.variants) w.sparsity[size_t(h.head)].push_back(v.reached.total());
      }
      core_.post([this, name, w = std::move(w), ticket, epoch] {
        if (ticket != ticket_ || epoch != core_.epoch) return;
        results_[name] = w;
        ++done_;
        ++generation_;
      });
    }
    core_.post([this, ticket] {
      if (ticket == ticket_) running_ = false;
    });
  };
  core_.submit(JobKind::MethodCompare, job, true);
}

}  // namespace sparge::gui
