// The tuner's per-head searches: θ sweep with τ / top-k bisection, λ bisection, candidate checks, and the
// whole one-entry search of a head built from them.
#include "tuner_search.h"

#include <algorithm>
#include <cmath>

namespace sparge::core::tuning {

HeadParams probeParams(const TuneOptions& o, double theta, double sel, double lambda) {
  HeadParams p = o.methodBase;
  p.theta = theta;
  p.mode = o.mode;
  if (o.mode == SelectMode::Cdf)
    p.tau = sel;
  else
    p.topk = sel;
  p.lambda = lambda;
  p.dense = false;
  return p;
}

HeadParams denseParams(const TuneOptions& o) {
  HeadParams p = probeParams(o, 1.0, 1.0, o.lambdaMax);
  p.topk = 1.0;
  p.tau = 1.0;
  p.dense = true;
  return p;
}

double selOf(const HeadParams& p) {
  return p.mode == SelectMode::Cdf ? p.tau : p.topk;
}

std::vector<double> sortedGrid(const std::vector<double>& g) {
  std::vector<double> s = g;
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

// ---- Bisection ----

Bisection::Bisection(double lo, double hi, double tolerance)
    : lo_(lo), hi_(hi), span_(hi - lo), tolerance_(tolerance) {}

void Bisection::feed(bool pass) {
  const double m = mid();
  (pass ? hi_ : lo_) = m;
}

double Bisection::fraction() const {
  const double needed = std::max(1.0, std::log2(span_ / tolerance_));
  return std::min(1.0, std::log2(span_ / std::max(hi_ - lo_, 1e-12)) / needed);
}

// ---- θ sweep ----

ThetaSweep::ThetaSweep(const TuneOptions& o, int32_t entry, std::vector<double> grid)
    : o_(o), entry_(entry), grid_(std::move(grid)) {}

bool ThetaSweep::next(Probe& probe) {
  while (!done_) {
    if (!sel_ && !startTheta()) continue;
    if (!sel_->open()) {
      finishTheta();
      continue;
    }
    probe.params = probeParams(o_, grid_[idx_], sel_->mid(), kNoPvSkipLambda);
    probe.phase = ProbePhase::Select;
    probe.budget = o_.l1;
    return true;
  }
  return false;
}

void ThetaSweep::feed(const Probe& probe, const Measured& m, bool pass) {
  if (!haveSims_ && (!m.simQ.empty() || !m.simK.empty())) {
    simQ_ = m.simQ;
    simK_ = m.simK;
    haveSims_ = true;
    lastSig_ = signature(grid_[idx_]);
  }
  ++current_.probes;
  if (pass && (!current_.passed || m.stage1 > current_.stage1 ||
               (m.stage1 == current_.stage1 && m.l1 < current_.l1))) {
    current_.passed = true;
    current_.sel = selOf(probe.params);
    current_.stage1 = m.stage1;
    current_.l1 = m.l1;
  }
  sel_->feed(pass);
}

double ThetaSweep::fraction() const {
  if (done_) return 1.0;
  const double inside = sel_ ? sel_->fraction() : 0.0;
  return std::min(1.0, (double(idx_) + inside) / double(grid_.size()));
}

const ThetaPoint* ThetaSweep::best() const {
  return bestPoint(points_);
}

HeadParams ThetaSweep::paramsAt(const ThetaPoint& p) const {
  return probeParams(o_, p.theta, p.sel, kNoPvSkipLambda);
}

const ThetaPoint* bestPoint(const std::vector<ThetaPoint>& points) {
  const ThetaPoint* b = nullptr;
  for (const ThetaPoint& p : points) {
    if (!p.passed) continue;
    if (!b || p.stage1 > b->stage1 || (p.stage1 == b->stage1 && p.l1 < b->l1)) b = &p;
  }
  return b;
}

int ThetaSweep::reusedCount() const {
  return int(std::count_if(points_.begin(), points_.end(),
                           [](const ThetaPoint& p) { return !std::isnan(p.reusedFrom); }));
}

// Returns true when a bisection starts for grid_[idx_]; false when the θ was settled without probes.
bool ThetaSweep::startTheta() {
  const double theta = grid_[idx_];
  current_ = ThetaPoint{};
  current_.entry = entry_;
  current_.theta = theta;
  if (haveSims_) {
    std::vector<uint8_t> sig = signature(theta);
    if (!points_.empty() && sig == lastSig_) {
      const ThetaPoint& prev = points_.back();
      current_ = prev;
      current_.theta = theta;
      current_.probes = 0;
      current_.reusedFrom = std::isnan(prev.reusedFrom) ? prev.theta : prev.reusedFrom;
      finishTheta();
      return false;
    }
    lastSig_ = sig;
    if (allForced(sig)) {
      // Every row or every column is forced on: the mask is dense whatever τ is (sparsity 0).
      current_.passed = false;
      finishTheta();
      return false;
    }
  }
  sel_.emplace(0.0, 1.0, o_.selTolerance);
  return true;
}

void ThetaSweep::finishTheta() {
  sel_.reset();
  points_.push_back(current_);
  const double s = current_.passed ? current_.stage1 : 0.0;
  ++idx_;
  if (s < o_.earlyStopSparsity || idx_ >= grid_.size()) done_ = true;
}

std::vector<uint8_t> ThetaSweep::signature(double theta) const {
  std::vector<uint8_t> sig;
  sig.reserve(simQ_.size() + simK_.size());
  for (float s : simQ_) sig.push_back(s > theta ? 1 : 0);  // NaN compares false: non-similar
  for (float s : simK_) sig.push_back(s > theta ? 1 : 0);
  return sig;
}

bool ThetaSweep::allForced(const std::vector<uint8_t>& sig) const {
  const auto q0 = sig.begin(), q1 = sig.begin() + ptrdiff_t(simQ_.size());
  const bool noQ = !simQ_.empty() && std::none_of(q0, q1, [](uint8_t x) { return x != 0; });
  const bool noK = !simK_.empty() && std::none_of(q1, sig.end(), [](uint8_t x) { return x != 0; });
  return noQ || noK;
}

// ---- λ bisection ----

LambdaSearch::LambdaSearch(const TuneOptions& o, HeadParams base, double budget)
    : base_(base), budget_(budget), bisection_(o.lambdaMin, o.lambdaMax, o.lambdaTolerance) {}

bool LambdaSearch::next(Probe& probe) {
  if (!bisection_.open()) return false;
  probe.params = base_;
  probe.params.lambda = bisection_.mid();
  probe.phase = ProbePhase::Lambda;
  probe.budget = budget_;
  return true;
}

void LambdaSearch::feed(const Probe& probe, const Measured& m, bool pass) {
  if (pass && (!found_ || m.total > best_.total || (m.total == best_.total && m.l1 < best_.l1))) {
    found_ = true;
    bestParams_ = probe.params;
    best_ = m;
  }
  bisection_.feed(pass);
}

// ---- candidate list ----

bool CandidateList::next(Probe& probe) {
  if (stopped_ || idx_ >= probes_.size()) return false;
  probe = probes_[idx_];
  return true;
}

void CandidateList::feed(const Probe&, const Measured& m, bool pass) {
  results_.push_back({m, pass});
  ++idx_;
  if (pass) stopped_ = true;
}

double CandidateList::fraction() const {
  return stopped_ ? 1.0 : double(idx_) / double(std::max<size_t>(1, probes_.size()));
}

// ---- the one-entry search of a head ----

SingleEntrySearch::SingleEntrySearch(const TuneOptions& o, std::vector<double> grid, TunedHead& out)
    : SingleEntrySearch(o, std::make_unique<ThetaSweep>(o, 0, std::move(grid)), out) {}

SingleEntrySearch::SingleEntrySearch(const TuneOptions& o, std::unique_ptr<SweepTask> sweep, TunedHead& out)
    : o_(o), out_(out), sweep_(std::move(sweep)) {
  decision_.method = o.method;
  decision_.mode = o.mode;
  decision_.l1Budget = o.l1;
  decision_.l2Budget = o.l2;
  decision_.minSparsity = o.minSparsity;
}

bool SingleEntrySearch::next(Probe& probe) {
  for (;;) {
    switch (stage_) {
      case Stage::Sweep:
        if (sweep_->next(probe)) return true;
        afterSweep();
        break;
      case Stage::Lambda:
        if (lambda_->next(probe)) return true;
        afterLambda();
        break;
      case Stage::Final:
        if (final_->next(probe)) return true;
        afterFinal();
        break;
      case Stage::Done:
        return false;
    }
  }
}

void SingleEntrySearch::feed(const Probe& probe, const Measured& m, bool pass) {
  switch (stage_) {
    case Stage::Sweep:
      sweep_->feed(probe, m, pass);
      break;
    case Stage::Lambda:
      lambda_->feed(probe, m, pass);
      break;
    case Stage::Final:
      final_->feed(probe, m, pass);
      break;
    case Stage::Done:
      break;
  }
}

double SingleEntrySearch::fraction() const {
  switch (stage_) {
    case Stage::Sweep:
      return kSingleSweep.at(sweep_->fraction());
    case Stage::Lambda:
      return kSingleLambda.at(lambda_->fraction());
    case Stage::Final:
      return kSingleFinal;
    case Stage::Done:
      return 1.0;
  }
  return 1.0;
}

void SingleEntrySearch::afterSweep() {
  out_.thetaPoints = sweep_->points();
  decision_.thetaSwept = int(out_.thetaPoints.size());
  decision_.thetaReused = sweep_->reusedCount();
  const ThetaPoint* b = sweep_->best();
  if (b) {
    decision_.theta = b->theta;
    decision_.sel = b->sel;
    decision_.stage1 = b->stage1;
    decision_.l1 = b->l1;
  }
  decision_.basis = b ? TuneDecision::Basis::BestPoint : TuneDecision::Basis::None;
  if (!b || b->stage1 <= o_.minSparsity) {
    decision_.denseCause =
        !b ? TuneDecision::DenseCause::NoPointMetL1 : TuneDecision::DenseCause::LowSparsity;
    startFinal(Probe{denseParams(o_), ProbePhase::Final, o_.l1}, /*denseHead=*/true);
    return;
  }
  base_ = sweep_->paramsAt(*b);
  decision_.pattern = base_.minference.pattern;
  baseMeasured_.stage1 = b->stage1;
  baseMeasured_.total = b->stage1;  // no PV skip
  baseMeasured_.l1 = b->l1;
  if (o_.tunePv) {
    lambda_ = std::make_unique<LambdaSearch>(o_, base_, o_.l2);
    stage_ = Stage::Lambda;
    return;
  }
  checkLambda(TuneDecision::LambdaSource::Fixed, o_.fixedLambda, o_.l1);
}

void SingleEntrySearch::afterLambda() {
  if (lambda_->found()) {
    decision_.lambdaSource = TuneDecision::LambdaSource::Bisection;
    decision_.lambda = lambda_->bestParams().lambda;
    finish(lambda_->bestParams(), lambda_->bestMeasured(), true);
    return;
  }
  checkLambda(TuneDecision::LambdaSource::Max, o_.lambdaMax, o_.l2);
}

// The (θ, τ) point with a λ that was not bisected (the fixed one, or the range's largest), checked once.
void SingleEntrySearch::checkLambda(TuneDecision::LambdaSource source, double lambda, double budget) {
  HeadParams p = base_;
  p.lambda = lambda;
  decision_.lambdaSource = source;
  decision_.lambda = lambda;
  startFinal(Probe{p, ProbePhase::Final, budget}, false);
}

void SingleEntrySearch::startFinal(const Probe& probe, bool denseHead) {
  finalDense_ = denseHead;
  finalProbe_ = probe;
  final_ = std::make_unique<CandidateList>(std::vector<Probe>{probe});
  stage_ = Stage::Final;
}

void SingleEntrySearch::afterFinal() {
  const auto& r = final_->results();
  if (finalDense_) {
    // The dense configuration is the reference itself; it is exported whatever its (tiny) L1.
    finish(finalProbe_.params, r.empty() ? Measured{} : r[0].first, false);
    return;
  }
  if (!r.empty() && r[0].second) {
    finish(finalProbe_.params, r[0].first, true);
    return;
  }
  // Keep the evaluated (θ, τ) point with PV skipping off.
  decision_.lambdaSource = TuneDecision::LambdaSource::PvSkipOff;
  decision_.lambda = kNoPvSkipLambda;
  finish(base_, baseMeasured_, true);
}

void SingleEntrySearch::finish(const HeadParams& p, const Measured& m, bool sparse) {
  out_.params = p;
  out_.isSparse = sparse;
  out_.stage1Sparsity = m.stage1;
  out_.totalSparsity = m.total;
  out_.l1 = m.l1;
  out_.l1Sparse = m.l1Sparse;
  out_.l1Quant = m.l1Quant;
  out_.perEntry.clear();
  out_.decision = decision_;
  stage_ = Stage::Done;
}

}  // namespace sparge::core::tuning
