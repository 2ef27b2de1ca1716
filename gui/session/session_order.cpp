// The session's token order (docs/permutation.md): choosing it, and putting the loaded entry in it.
#include "session.h"
#include "sparge/core/error.h"

namespace sparge::gui {

std::string Session::permutationProblem(core::Permutation p) const {
  const CaptureModel& c = core_.capture;
  const core::EntryInfo* captured = c.find(c.entryName);
  return captured ? core::permutationProblem(*captured, p) : std::string();
}

void Session::adoptOrder(const std::shared_ptr<const core::EntryData>& base, core::Permutation p) {
  Backend& b = *core_.backend;
  if (!b.orders || b.orders->base() != base) b.orders = std::make_unique<core::PermutedEntries>(base);
  const std::string problem = core::permutationProblem(base->info, p);
  b.entry = b.orders->get(problem.empty() ? p : core::Permutation::None, "token order");
  b.ensureEngine().setEntry(b.entry);
  if (!problem.empty() && p != core::Permutation::None)
    core_.post(
        [this, problem] { core_.messages.addNotice("Token order: capture order here (" + problem + ")"); });
}

void Session::setPermutation(core::Permutation p) {
  if (p == permutation_) return;
  permutation_ = p;
  CaptureModel& c = core_.capture;
  if (!c.loaded) return;
  if (std::string problem = permutationProblem(p); !problem.empty() && p != core::Permutation::None) {
    core_.messages.addNotice("Token order " + std::string(core::toString(p)) + ": " + problem);
    return;
  }
  // The same entry in another order: every cached result of the old order is stale.
  core_.cancel(JobKind::Run);
  core_.cancel(JobKind::Tune);
  core_.cancel(JobKind::Curves);
  c.loaded = false;
  reset(ResetScope::Entry);
  auto backend = core_.backend;
  const uint64_t epoch = core_.epoch;
  core_.submit(JobKind::Load, [this, backend, p, epoch](const core::CancelFlag&) {
    if (!backend->orders) throw sparge::Error("token order", "no entry loaded");
    adoptOrder(backend->orders->base(), p);
    // The content's identity does not change with the order.
    core_.post([this, info = backend->entry->info, digest = backend->orders->base()->digest, epoch] {
      onEntryLoaded(info, digest, {}, epoch);
    });
  });
}

}  // namespace sparge::gui
