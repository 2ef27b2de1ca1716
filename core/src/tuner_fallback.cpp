// The exact fallback of a group: before the search, one dense run per entry in the tuned numerics measures
// what quantization alone costs each head (l1_quant, and its INT8 Q·Kᵀ part); heads where that reaches l1
// cannot meet the budget with any θ, τ, λ, so they (or their entry, or their layer: ExactFallback) are tuned
// and recorded in exact numerics. The scan costs about one probe: the dense outputs it computes are the
// ones every later probe compares with, cached by the engine.
#include <algorithm>
#include <cmath>

#include "sparge/core/error.h"
#include "tuner_group.h"

namespace sparge::core::tuning {

// Every head of `heads` dense, on the engine's current entry, in the tuned numerics.
std::map<int64_t, Measured> GroupRunner::scanCurrent(const std::vector<int64_t>& heads) {
  RunConfig cfg = probeConfig();
  cfg.perHeadNumerics.clear();
  for (int64_t h : heads) cfg.perHead[size_t(h)] = denseParams(o_);
  return evaluate(cfg, heads, true);
}

void GroupRunner::scanQuantization() {
  const bool wide = o_.exactFallback == ExactFallback::Entry || o_.exactFallback == ExactFallback::Layer;
  std::vector<int64_t> scanned = heads_;
  if (wide) {
    scanned.clear();
    for (int64_t h = 0; h < headsQ_; ++h) scanned.push_back(h);
  }
  // Whether some head of another group's entry of this layer breaks l1 when quantized. The peers are
  // scanned first, and the group's entries last to first, so that entry 0, where the search starts, stays.
  bool layerHit = false;
  if (o_.exactFallback == ExactFallback::Layer)
    for (const TuneInput& peer : input_.layerPeers) {
      if (cb_.cancel && cb_.cancel->load()) throw Cancelled();
      if (!peer.load) throw Error("tune " + peer.name, "no loader for this entry");
      std::shared_ptr<const EntryData> data = peer.load();
      if (!data) throw Error("tune " + peer.name, "the entry could not be loaded");
      std::vector<int64_t> all;
      for (int64_t h = 0; h < data->info.headsQ; ++h) all.push_back(h);
      useEntry(std::move(data));
      // The group's settings, every head of the peer dense (its head count may differ from the group's).
      RunConfig cfg = probeConfig();
      cfg.perHead.clear();
      cfg.perHeadNumerics.clear();
      cfg.defaults = denseParams(o_);
      for (const auto& [h, m] : evaluate(cfg, all, true)) layerHit = layerHit || !(m.l1Quant < o_.l1);
    }
  for (size_t e = input_.entries.size(); e-- > 0;) {
    if (cb_.cancel && cb_.cancel->load()) throw Cancelled();
    setEntry(e);
    for (const auto& [h, m] : scanCurrent(scanned)) {
      auto raise = [](double& slot, double v) {
        if (std::isnan(slot) || v > slot || std::isnan(v)) slot = v;
      };
      raise(quantL1_[size_t(h)], m.l1Quant);
      raise(quantQkL1_[size_t(h)], m.l1QuantQk);
    }
  }
  // A NaN dense L1 (non-finite outputs) cannot be budgeted either: it counts as over.
  std::vector<uint8_t> ownHit(size_t(headsQ_), 0);
  bool entryHit = false;
  for (int64_t h : scanned) {
    ownHit[size_t(h)] = !(quantL1_[size_t(h)] < o_.l1);
    entryHit = entryHit || ownHit[size_t(h)];
  }
  chooseExactHeads(ownHit, entryHit, layerHit);
}

void GroupRunner::chooseExactHeads(const std::vector<uint8_t>& ownHit, bool entryHit, bool layerHit) {
  using C = TuneDecision::ExactCause;
  for (int64_t h : heads_) {
    C cause = C::None;
    switch (o_.exactFallback) {
      case ExactFallback::Off:
        break;
      case ExactFallback::Head:
        cause = ownHit[size_t(h)] ? C::OwnQuantization : C::None;
        break;
      case ExactFallback::Entry:
      case ExactFallback::Layer:
        cause = ownHit[size_t(h)] ? C::OwnQuantization
                : entryHit        ? C::SameEntry
                : layerHit        ? C::SameLayer
                                  : C::None;
        break;
    }
    exactCause_[size_t(h)] = cause;
    exact_[size_t(h)] = cause != C::None;
  }
}

// The head's numerics, the scan's figures (they stay those of the tuned numerics for exact heads too: the
// reason for the fallback) and the fallback in its decision.
void GroupRunner::recordExact(TunedHead& th) const {
  const size_t h = size_t(th.head);
  th.exact = exact_[h] != 0;
  if (o_.numerics == Numerics::None) return;
  th.l1Quant = quantL1_[h];
  th.l1QuantQk = quantQkL1_[h];
  th.decision.l1Budget = o_.l1;
  th.decision.exactCause = exactCause_[h];
  if (exact_[h]) {
    th.decision.quantNumerics = o_.numerics;
    th.decision.quantL1 = quantL1_[h];
  }
}

}  // namespace sparge::core::tuning
