// The knob search of the methods other than SpargeAttn (tuner_method.h).
#include "tuner_method.h"

#include <algorithm>
#include <cmath>

#include "sparge/core/method_knob.h"

namespace sparge::core::tuning {

std::vector<HeadParams> minferenceCandidates(const HeadParams& base, const EntryInfo& info,
                                             const Geometry& g) {
  std::vector<HeadParams> out;
  for (const auto& [v, s] :
       {std::pair<int64_t, int64_t>{30, 800}, {100, 750}, {500, 700}, {3500, 100}, {100, 800}}) {
    HeadParams p = base;
    p.minference.pattern = MInferencePattern::VerticalSlash;
    p.minference.verticalSize = v;
    p.minference.slashSize = s;
    out.push_back(p);
  }
  HeadParams p = base;
  p.minference.pattern = MInferencePattern::BlockSparse;
  p.minference.topk = std::max<int64_t>(1, ceilDiv(info.tokensKV, g.blockK) / 8);
  out.push_back(p);
  return out;
}

KnobSweep::KnobSweep(const TuneOptions& o, const EntryInfo& info, int32_t entry)
    : o_(o), info_(info), entry_(entry), base_(o.methodBase) {
  base_.dense = false;
  base_.lambda = kNoPvSkipLambda;
  if (o.method == Method::MInference)
    candidates_ = minferenceCandidates(base_, info_, o.geometry);
  else
    startBisection();
}

void KnobSweep::startBisection() {
  const KnobRange r = knobRange(o_.method, base_, info_, o_.geometry);
  bisection_.emplace(r.lo, r.hi, r.tolerance);
}

bool KnobSweep::next(Probe& probe) {
  probe.phase = ProbePhase::Select;
  probe.budget = o_.l1;
  if (candidate_ < candidates_.size()) {
    probe.params = candidates_[candidate_];
    return true;
  }
  if (done_ || !bisection_ || !bisection_->open()) {
    done_ = true;
    return false;
  }
  probe.params = withKnob(o_.method, base_, bisection_->mid(), info_, o_.geometry);
  return true;
}

void KnobSweep::feed(const Probe& probe, const Measured& m, bool pass) {
  if (candidate_ < candidates_.size()) {
    // The pattern with the largest share of the dense attention in its blocks; ties keep the first.
    const double recall = std::isfinite(m.recall) ? m.recall : 0.0;
    if (recall > bestRecall_) {
      bestRecall_ = recall;
      base_ = probe.params;
    }
    if (++candidate_ == candidates_.size()) startBisection();
    return;
  }
  ThetaPoint p;
  p.entry = entry_;
  p.theta = 0;
  p.sel = bisection_->mid();  // the knob value exactly: paramsAt gives back the probe's parameters
  p.passed = pass;
  p.stage1 = pass ? m.stage1 : 0;
  p.l1 = m.l1;
  p.probes = 1;
  points_.push_back(p);
  bisection_->feed(pass);
}

double KnobSweep::fraction() const {
  if (done_) return 1.0;
  const double patterns = candidates_.empty() ? 0.0 : 0.2;
  const double inPatterns = candidates_.empty() ? 1.0 : double(candidate_) / double(candidates_.size());
  const double inBisection = bisection_ ? bisection_->fraction() : 0.0;
  return patterns * inPatterns + (1.0 - patterns) * inBisection;
}

HeadParams KnobSweep::paramsAt(const ThetaPoint& p) const {
  return withKnob(o_.method, base_, p.sel, info_, o_.geometry);
}

}  // namespace sparge::core::tuning
