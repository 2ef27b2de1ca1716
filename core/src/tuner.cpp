// The auto-tuner. Each head's search is a small state machine that proposes one probe at a time; a
// driver collects the next probe of every unfinished head and evaluates them all in ONE Engine::run
// (per-head parameters in RunConfig::perHead), so the engine's parallelism over heads is always used.
#include "sparge/core/tuner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "sparge/core/error.h"

namespace sparge::core {
namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fmt(double v, int digits = 4) {
  std::ostringstream s;
  s.precision(digits);
  s << v;
  return s.str();
}

// Figures of one head in one run, summed over the batch items.
struct Measured {
  double stage1 = 0, total = 0, l1 = 0;
  // The same run in exact numerics, and dense in the tuned numerics (NaN when not measured).
  double l1Sparse = std::numeric_limits<double>::quiet_NaN(), l1Quant = std::numeric_limits<double>::quiet_NaN();
  // Self-similarity of every Q / K block of every batch item (empty when the engine does not report
  // them); used to find θ values that give identical masks.
  std::vector<float> simQ, simK;
};

HeadParams probeParams(const TuneOptions& o, double theta, double sel, double lambda) {
  HeadParams p;
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

// What upstream writes for a non-sparse head (θ = 1, τ = 1): every block forced on, no useful skip.
HeadParams denseParams(const TuneOptions& o) {
  HeadParams p = probeParams(o, 1.0, 1.0, o.lambdaMax);
  p.topk = 1.0;
  p.tau = 1.0;
  p.dense = true;
  return p;
}

double selOf(const HeadParams& p) { return p.mode == SelectMode::Cdf ? p.tau : p.topk; }

// A probe proposed by a task, with the budget it is judged against.
struct Probe {
  HeadParams params;
  ProbePhase phase = ProbePhase::Select;
  double budget = 0;
};

class HeadTask {
 public:
  virtual ~HeadTask() = default;
  // The next probe, or false when the task is finished.
  virtual bool next(Probe& probe) = 0;
  virtual void feed(const Probe& probe, const Measured& m, bool pass) = 0;
  virtual double fraction() const = 0;
};

// θ sweep (ascending) with a τ / top-k bisection per θ, PV skip off. θ values whose self-similarity
// flags are identical to the previous θ's give identical masks for every τ, so their result is reused
// instead of re-searched (upstream re-runs them: all θ < 0 are equivalent, for example).
class SelectSearch : public HeadTask {
 public:
  SelectSearch(const TuneOptions& o, int32_t entry, std::vector<double> grid)
      : o_(o), entry_(entry), grid_(std::move(grid)) {}

  bool next(Probe& probe) override {
    while (!done_) {
      if (!inTheta_ && !startTheta()) continue;
      if (hi_ - lo_ < o_.selTolerance) {
        finishTheta();
        continue;
      }
      mid_ = 0.5 * (lo_ + hi_);
      probe.params = probeParams(o_, grid_[idx_], mid_, kNoPvSkipLambda);
      probe.phase = ProbePhase::Select;
      probe.budget = o_.l1;
      return true;
    }
    return false;
  }

  void feed(const Probe& probe, const Measured& m, bool pass) override {
    if (!haveSims_ && (!m.simQ.empty() || !m.simK.empty())) {
      simQ_ = m.simQ;
      simK_ = m.simK;
      haveSims_ = true;
      lastSig_ = signature(grid_[idx_]);
    }
    ++current_.probes;
    if (pass) {
      hi_ = mid_;
      if (!current_.passed || m.stage1 > current_.stage1 ||
          (m.stage1 == current_.stage1 && m.l1 < current_.l1)) {
        current_.passed = true;
        current_.sel = selOf(probe.params);
        current_.stage1 = m.stage1;
        current_.l1 = m.l1;
      }
    } else {
      lo_ = mid_;
    }
  }

  double fraction() const override {
    if (done_) return 1.0;
    const double inside = inTheta_ ? std::min(1.0, std::log2(1.0 / std::max(hi_ - lo_, 1e-12)) /
                                                       std::log2(1.0 / o_.selTolerance))
                                   : 0.0;
    return std::min(1.0, (double(idx_) + inside) / double(grid_.size()));
  }

  bool done() const { return done_; }
  const std::vector<ThetaPoint>& points() const { return points_; }

  // Best passing point: the largest stage-1 sparsity, then the smallest L1, then the smallest θ.
  const ThetaPoint* best() const {
    const ThetaPoint* b = nullptr;
    for (const ThetaPoint& p : points_) {
      if (!p.passed) continue;
      if (!b || p.stage1 > b->stage1 || (p.stage1 == b->stage1 && p.l1 < b->l1)) b = &p;
    }
    return b;
  }

 private:
  // Returns true when a bisection starts for grid_[idx_]; false when the θ was settled without probes.
  bool startTheta() {
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
    lo_ = 0.0;
    hi_ = 1.0;
    inTheta_ = true;
    return true;
  }

  void finishTheta() {
    inTheta_ = false;
    points_.push_back(current_);
    const double s = current_.passed ? current_.stage1 : 0.0;
    ++idx_;
    if (s < o_.earlyStopSparsity || idx_ >= grid_.size()) done_ = true;
  }

  std::vector<uint8_t> signature(double theta) const {
    std::vector<uint8_t> sig;
    sig.reserve(simQ_.size() + simK_.size());
    for (float s : simQ_) sig.push_back(s > theta ? 1 : 0);  // NaN compares false: non-similar
    for (float s : simK_) sig.push_back(s > theta ? 1 : 0);
    return sig;
  }

  bool allForced(const std::vector<uint8_t>& sig) const {
    const auto q0 = sig.begin(), q1 = sig.begin() + ptrdiff_t(simQ_.size());
    const bool noQ = !simQ_.empty() && std::none_of(q0, q1, [](uint8_t x) { return x != 0; });
    const bool noK = !simK_.empty() && std::none_of(q1, sig.end(), [](uint8_t x) { return x != 0; });
    return noQ || noK;
  }

  const TuneOptions& o_;
  int32_t entry_;
  std::vector<double> grid_;
  size_t idx_ = 0;
  bool done_ = false, inTheta_ = false;
  double lo_ = 0, hi_ = 1, mid_ = 0.5;
  ThetaPoint current_;
  std::vector<ThetaPoint> points_;
  bool haveSims_ = false;
  std::vector<float> simQ_, simK_;
  std::vector<uint8_t> lastSig_;
};

// λ bisection on [lambdaMin, lambdaMax] for fixed θ, τ: the smallest passing λ (most PV skipping) that
// was evaluated. `best()` is null when no probe passed.
class LambdaSearch : public HeadTask {
 public:
  LambdaSearch(const TuneOptions& o, HeadParams base, double budget)
      : o_(o), base_(base), budget_(budget), lo_(o.lambdaMin), hi_(o.lambdaMax) {}

  bool next(Probe& probe) override {
    if (hi_ - lo_ < o_.lambdaTolerance) return false;
    mid_ = 0.5 * (lo_ + hi_);
    probe.params = base_;
    probe.params.lambda = mid_;
    probe.phase = ProbePhase::Lambda;
    probe.budget = budget_;
    return true;
  }

  void feed(const Probe& probe, const Measured& m, bool pass) override {
    ++probes_;
    if (pass) {
      hi_ = mid_;
      if (!found_ || m.total > best_.total || (m.total == best_.total && m.l1 < best_.l1)) {
        found_ = true;
        bestParams_ = probe.params;
        best_ = m;
      }
    } else {
      lo_ = mid_;
    }
  }

  double fraction() const override {
    const double span = o_.lambdaMax - o_.lambdaMin;
    return std::min(1.0, std::log2(span / std::max(hi_ - lo_, 1e-12)) /
                             std::max(1.0, std::log2(span / o_.lambdaTolerance)));
  }

  bool found() const { return found_; }
  const HeadParams& bestParams() const { return bestParams_; }
  const Measured& bestMeasured() const { return best_; }

 private:
  const TuneOptions& o_;
  HeadParams base_;
  double budget_;
  double lo_, hi_, mid_ = 0;
  int probes_ = 0;
  bool found_ = false;
  HeadParams bestParams_;
  Measured best_;
};

// Evaluates a list of candidates in order and stops at the first that passes (or evaluates one
// candidate only: the group-mode verification runs each candidate on every entry).
class CandidateList : public HeadTask {
 public:
  explicit CandidateList(std::vector<Probe> probes) : probes_(std::move(probes)) {}
  bool next(Probe& probe) override {
    if (stopped_ || idx_ >= probes_.size()) return false;
    probe = probes_[idx_];
    return true;
  }
  void feed(const Probe&, const Measured& m, bool pass) override {
    results_.push_back({m, pass});
    ++idx_;
    if (pass) stopped_ = true;
  }
  double fraction() const override { return stopped_ ? 1.0 : double(idx_) / double(std::max<size_t>(1, probes_.size())); }
  const std::vector<std::pair<Measured, bool>>& results() const { return results_; }

 private:
  std::vector<Probe> probes_;
  size_t idx_ = 0;
  bool stopped_ = false;
  std::vector<std::pair<Measured, bool>> results_;
};

// The whole single-entry search of one head: θ sweep → best point → is_sparse cut → λ → verification.
class SingleHead : public HeadTask {
 public:
  SingleHead(const TuneOptions& o, std::vector<double> grid, TunedHead& out)
      : o_(o), out_(out), select_(o, 0, std::move(grid)) {}

  bool next(Probe& probe) override {
    for (;;) {
      switch (stage_) {
        case Stage::Select:
          if (select_.next(probe)) return true;
          afterSelect();
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

  void feed(const Probe& probe, const Measured& m, bool pass) override {
    switch (stage_) {
      case Stage::Select: select_.feed(probe, m, pass); break;
      case Stage::Lambda: lambda_->feed(probe, m, pass); break;
      case Stage::Final: final_->feed(probe, m, pass); break;
      case Stage::Done: break;
    }
  }

  double fraction() const override {
    switch (stage_) {
      case Stage::Select: return 0.8 * select_.fraction();
      case Stage::Lambda: return 0.8 + 0.18 * lambda_->fraction();
      case Stage::Final: return 0.98;
      case Stage::Done: return 1.0;
    }
    return 1.0;
  }

  bool done() const { return stage_ == Stage::Done; }

 private:
  enum class Stage { Select, Lambda, Final, Done };

  void afterSelect() {
    out_.thetaPoints = select_.points();
    const ThetaPoint* b = select_.best();
    int reused = 0;
    for (const ThetaPoint& p : out_.thetaPoints) reused += std::isnan(p.reusedFrom) ? 0 : 1;
    const std::string swept = std::to_string(out_.thetaPoints.size()) + " θ swept (" + std::to_string(reused) +
                              " reused as mask-identical)";
    if (!b || b->stage1 <= o_.minSparsity) {
      decision_ = !b ? "dense: no θ met l1 < " + fmt(o_.l1) + "; " + swept
                     : "dense: best stage-1 sparsity " + fmt(b->stage1) + " <= " + fmt(o_.minSparsity) + " at θ=" +
                           fmt(b->theta) + "; " + swept;
      startFinal({Probe{denseParams(o_), ProbePhase::Final, o_.l1}}, /*denseHead=*/true);
      return;
    }
    base_ = probeParams(o_, b->theta, b->sel, kNoPvSkipLambda);
    baseMeasured_.stage1 = b->stage1;
    baseMeasured_.total = b->stage1;  // no PV skip
    baseMeasured_.l1 = b->l1;
    decision_ = "best of " + swept + ": θ=" + fmt(b->theta) + " " + (o_.mode == SelectMode::Cdf ? "τ=" : "topk=") +
                fmt(b->sel) + " stage-1 sparsity " + fmt(b->stage1) + " L1 " + fmt(b->l1);
    if (o_.tunePv) {
      lambda_ = std::make_unique<LambdaSearch>(o_, base_, o_.l2);
      stage_ = Stage::Lambda;
    } else {
      HeadParams p = base_;
      p.lambda = o_.fixedLambda;
      decision_ += "; λ fixed at " + fmt(o_.fixedLambda);
      startFinal({Probe{p, ProbePhase::Final, o_.l1}}, false);
    }
  }

  void afterLambda() {
    if (lambda_->found()) {
      decision_ += "; λ=" + fmt(lambda_->bestParams().lambda) + " (smallest passing L1 < l2=" + fmt(o_.l2) + ")";
      finish(lambda_->bestParams(), lambda_->bestMeasured(), true);
      return;
    }
    HeadParams p = base_;
    p.lambda = o_.lambdaMax;
    decision_ += "; no λ probe met l2, verifying λ=" + fmt(o_.lambdaMax);
    startFinal({Probe{p, ProbePhase::Final, o_.l2}}, false);
  }

  void startFinal(std::vector<Probe> probes, bool denseHead) {
    finalDense_ = denseHead;
    finalProbes_ = probes;
    final_ = std::make_unique<CandidateList>(std::move(probes));
    stage_ = Stage::Final;
  }

  void afterFinal() {
    const auto& r = final_->results();
    if (finalDense_) {
      // The dense configuration is the reference itself; it is exported whatever its (tiny) L1.
      finish(finalProbes_[0].params, r.empty() ? Measured{} : r[0].first, false);
      return;
    }
    if (!r.empty() && r[0].second) {
      finish(finalProbes_[0].params, r[0].first, true);
      return;
    }
    // Keep the evaluated (θ, τ) point with PV skipping off.
    decision_ += "; verification failed, PV skip disabled (λ=" + fmt(kNoPvSkipLambda) + ")";
    finish(base_, baseMeasured_, true);
  }

  void finish(const HeadParams& p, const Measured& m, bool sparse) {
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

  const TuneOptions& o_;
  TunedHead& out_;
  Stage stage_ = Stage::Select;
  SelectSearch select_;
  std::unique_ptr<LambdaSearch> lambda_;
  std::unique_ptr<CandidateList> final_;
  std::vector<Probe> finalProbes_;
  bool finalDense_ = false;
  HeadParams base_;
  Measured baseMeasured_;
  std::string decision_;
};

std::vector<double> sortedGrid(const std::vector<double>& g) {
  std::vector<double> s = g;
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

// Runs one group; owns the engine-facing loop and the progress bookkeeping.
class GroupRunner {
 public:
  GroupRunner(Engine& engine, const TuneOptions& o, const TuneCallbacks& cb, TuneResult& result,
              const TuneGroupInput& input, TunedGroup& group, Clock::time_point start, int64_t unitsBefore,
              int64_t unitsTotal)
      : engine_(engine), o_(o), cb_(cb), result_(result), input_(input), group_(group), start_(start),
        unitsBefore_(unitsBefore), unitsTotal_(unitsTotal) {}

  void run() {
    group_.name = input_.name;
    group_.layer = input_.layer;
    for (const TuneInput& e : input_.entries) group_.entries.push_back(e.name);
    // The first entry fixes the head count (others are checked on load).
    setEntry(0);
    group_.headsQ = headsQ_;
    heads_ = o_.heads;
    if (heads_.empty())
      for (int64_t h = 0; h < headsQ_; ++h) heads_.push_back(h);
    std::sort(heads_.begin(), heads_.end());
    heads_.erase(std::unique(heads_.begin(), heads_.end()), heads_.end());
    for (int64_t h : heads_)
      if (h < 0 || h >= headsQ_)
        throw Error("tune " + input_.name, "head " + std::to_string(h) + " out of range (the entry has " +
                                               std::to_string(headsQ_) + " query heads)");
    work_.assign(size_t(headsQ_), TunedHead{});
    for (int64_t h : heads_) work_[size_t(h)].head = h;
    if (input_.entries.size() == 1)
      runSingle();
    else
      runTogether();
    group_.complete = true;
    report(1.0);
  }

 private:
  void setEntry(size_t idx) {
    if (current_ == int(idx) && engine_.entry()) return;
    const TuneInput& in = input_.entries[idx];
    if (!in.load) throw Error("tune " + in.name, "no loader for this entry");
    std::shared_ptr<const EntryData> data = in.load();
    if (!data) throw Error("tune " + in.name, "the entry could not be loaded");
    if (headsQ_ == 0) headsQ_ = data->info.headsQ;
    if (data->info.headsQ != headsQ_)
      throw Error("tune " + input_.name, "entries tuned together must have the same number of query heads (" +
                                             in.name + " has " + std::to_string(data->info.headsQ) + ", " +
                                             input_.entries[0].name + " has " + std::to_string(headsQ_) + ")");
    engine_.setEntry(std::move(data));
    current_ = int(idx);
  }

  // Evaluates the next probe of every unfinished task in one engine run per step, until all are done.
  // `onDone(h)` is called once when head h's task finishes.
  void lockstep(int32_t entry, std::vector<HeadTask*>& tasks, const std::function<void(int64_t)>& onDone,
                const std::function<double()>& fraction) {
    setEntry(size_t(entry));
    std::vector<bool> reported(tasks.size(), false);
    for (;;) {
      if (cb_.cancel && cb_.cancel->load()) throw Cancelled();
      RunConfig cfg;
      cfg.geometry = o_.geometry;
      cfg.numerics = o_.numerics;
      cfg.smoothK = o_.smoothK;
      cfg.sink = o_.sink;
      cfg.perHead.assign(size_t(headsQ_), cfg.defaults);
      std::vector<Probe> probes(tasks.size());
      RunOptions ro;
      ro.cancel = cb_.cancel;
      ro.computeError = true;
      for (size_t h = 0; h < tasks.size(); ++h) {
        if (!tasks[h]) continue;
        if (tasks[h]->next(probes[h])) {
          ro.heads.push_back(int64_t(h));
          cfg.perHead[h] = probes[h].params;
        } else if (!reported[h]) {
          reported[h] = true;
          if (onDone) onDone(int64_t(h));
        }
      }
      if (ro.heads.empty()) return;
      EntryResult res = engine_.run(cfg, ro);
      ++result_.probes;
      std::map<int64_t, std::pair<SparsityCounts, ErrorSums>> sums;
      std::map<int64_t, std::pair<ErrorSums, ErrorSums>> splitSums;  // sparse alone, quantization alone
      std::map<int64_t, Measured> measured;
      for (const HeadResult& hr : res.heads) {
        auto& s = sums[hr.head];
        s.first += hr.sparsity;
        s.second += hr.error;
        splitSums[hr.head].first += hr.errorSparse;
        splitSums[hr.head].second += hr.errorQuant;
        Measured& m = measured[hr.head];
        m.simQ.insert(m.simQ.end(), hr.selfSimQ.begin(), hr.selfSimQ.end());
        m.simK.insert(m.simK.end(), hr.selfSimK.begin(), hr.selfSimK.end());
      }
      for (int64_t h : ro.heads) {
        auto it = sums.find(h);
        if (it == sums.end())
          throw Error("tune " + input_.name, "the engine returned no result for head " + std::to_string(h));
        Measured& m = measured[h];
        m.stage1 = it->second.first.stage1();
        m.total = it->second.first.total();
        m.l1 = it->second.second.l1();
        m.l1Sparse = splitSums[h].first.l1();
        m.l1Quant = splitSums[h].second.l1();
        const Probe& p = probes[size_t(h)];
        const bool pass = std::isfinite(m.l1) && m.l1 < p.budget;
        tasks[size_t(h)]->feed(p, m, pass);
        TunedHead& th = work_[size_t(h)];
        ++th.probes;
        TuneProbe tp;
        tp.entry = entry;
        tp.phase = p.phase;
        tp.dense = p.params.dense;
        tp.theta = float(p.params.theta);
        tp.sel = float(selOf(p.params));
        tp.lambda = float(p.params.lambda);
        tp.stage1 = float(m.stage1);
        tp.total = float(m.total);
        tp.l1 = float(m.l1);
        tp.pass = pass;
        th.trace.push_back(tp);
        phase_ = p.phase;
      }
      report(fraction());
    }
  }

  void report(double groupFraction) {
    if (!cb_.progress) return;
    TuneProgress pr;
    pr.unitsTotal = unitsTotal_;
    pr.unitsDone = unitsBefore_ + unitsDoneHere_;
    const double groupUnits = double(heads_.size() * input_.entries.size());
    pr.fraction = unitsTotal_ > 0 ? std::min(1.0, (double(unitsBefore_) + groupFraction * groupUnits) /
                                                     double(unitsTotal_))
                                  : 1.0;
    pr.elapsedSeconds = secondsSince(start_);
    pr.etaSeconds = pr.fraction > 0.01 ? pr.elapsedSeconds * (1.0 - pr.fraction) / pr.fraction : -1.0;
    pr.group = input_.name;
    pr.phase = phase_;
    pr.probes = result_.probes;
    cb_.progress(pr);
  }

  void publish(int64_t h) {
    group_.heads.push_back(std::move(work_[size_t(h)]));
    std::sort(group_.heads.begin(), group_.heads.end(),
              [](const TunedHead& a, const TunedHead& b) { return a.head < b.head; });
    if (cb_.headFinished) cb_.headFinished(group_, *group_.find(h));
  }

  void runSingle() {
    const std::vector<double> grid = sortedGrid(o_.thetaGrid);
    std::vector<std::unique_ptr<SingleHead>> owned(static_cast<size_t>(headsQ_));
    std::vector<HeadTask*> tasks(static_cast<size_t>(headsQ_), nullptr);
    for (int64_t h : heads_) {
      owned[size_t(h)] = std::make_unique<SingleHead>(o_, grid, work_[size_t(h)]);
      tasks[size_t(h)] = owned[size_t(h)].get();
    }
    const std::string name = input_.entries[0].name;
    auto onDone = [&](int64_t h) {
      TunedHead& th = work_[size_t(h)];
      th.perEntry = {EntryAchieved{name, th.stage1Sparsity, th.totalSparsity, th.l1}};
      ++unitsDoneHere_;
      publish(h);
    };
    auto fraction = [&] {
      double f = 0;
      for (int64_t h : heads_) f += owned[size_t(h)]->fraction();
      return f / double(heads_.size());
    };
    lockstep(0, tasks, onDone, fraction);
  }

  // Runs one CandidateList per head on every entry (candidate k of every unresolved head in round k);
  // a head resolves at the first candidate that passes its budget on every entry. With `acceptLast`,
  // the last candidate is taken even if it fails. Returns per head the chosen index (-1: none) and the
  // per-entry figures of that candidate.
  struct Chosen {
    int index = -1;
    std::vector<Measured> perEntry;
  };
  std::vector<Chosen> verifyAcross(const std::vector<std::vector<Probe>>& candidates, bool acceptLast,
                                   double fracLo, double fracHi) {
    std::vector<Chosen> chosen(static_cast<size_t>(headsQ_));
    std::vector<bool> open(static_cast<size_t>(headsQ_), false);
    size_t rounds = 0;
    for (int64_t h : heads_)
      if (!candidates[size_t(h)].empty()) {
        open[size_t(h)] = true;
        rounds = std::max(rounds, candidates[size_t(h)].size());
      }
    const size_t nE = input_.entries.size();
    for (size_t k = 0; k < rounds; ++k) {
      std::vector<std::vector<Measured>> figures(static_cast<size_t>(headsQ_));
      std::vector<bool> allPass(static_cast<size_t>(headsQ_), true);
      bool any = false;
      for (size_t e = 0; e < nE; ++e) {
        std::vector<std::unique_ptr<CandidateList>> owned(static_cast<size_t>(headsQ_));
        std::vector<HeadTask*> tasks(static_cast<size_t>(headsQ_), nullptr);
        for (int64_t h : heads_) {
          if (!open[size_t(h)] || k >= candidates[size_t(h)].size()) continue;
          owned[size_t(h)] = std::make_unique<CandidateList>(std::vector<Probe>{candidates[size_t(h)][k]});
          tasks[size_t(h)] = owned[size_t(h)].get();
          any = true;
        }
        if (!any) break;
        const double f = fracLo + (fracHi - fracLo) * double(k * nE + e) / double(rounds * nE);
        lockstep(int32_t(e), tasks, nullptr, [f] { return f; });
        for (int64_t h : heads_) {
          if (!owned[size_t(h)]) continue;
          const auto& r = owned[size_t(h)]->results();
          if (r.empty()) continue;
          figures[size_t(h)].push_back(r[0].first);
          if (!r[0].second) allPass[size_t(h)] = false;
        }
      }
      if (!any) break;
      for (int64_t h : heads_) {
        if (!open[size_t(h)] || k >= candidates[size_t(h)].size()) continue;
        const bool last = k + 1 == candidates[size_t(h)].size();
        if (allPass[size_t(h)] || (last && acceptLast)) {
          chosen[size_t(h)].index = int(k);
          chosen[size_t(h)].perEntry = figures[size_t(h)];
          open[size_t(h)] = false;
        } else if (last) {
          open[size_t(h)] = false;
        }
      }
    }
    return chosen;
  }

  void runTogether() {
    const std::vector<double> grid = sortedGrid(o_.thetaGrid);
    const size_t nE = input_.entries.size();
    std::vector<std::vector<ThetaPoint>> points(static_cast<size_t>(headsQ_));

    // 1. θ sweep with τ / top-k bisection on every entry (PV off). Weight of this stage: 70%.
    for (size_t e = 0; e < nE; ++e) {
      std::vector<std::unique_ptr<SelectSearch>> owned(static_cast<size_t>(headsQ_));
      std::vector<HeadTask*> tasks(static_cast<size_t>(headsQ_), nullptr);
      for (int64_t h : heads_) {
        owned[size_t(h)] = std::make_unique<SelectSearch>(o_, int32_t(e), grid);
        tasks[size_t(h)] = owned[size_t(h)].get();
      }
      auto fraction = [&] {
        double f = 0;
        for (int64_t h : heads_) f += owned[size_t(h)]->fraction();
        return 0.7 * (double(e) + f / double(heads_.size())) / double(nE);
      };
      lockstep(int32_t(e), tasks, [&](int64_t) { ++unitsDoneHere_; }, fraction);
      for (int64_t h : heads_) {
        const auto& p = owned[size_t(h)]->points();
        points[size_t(h)].insert(points[size_t(h)].end(), p.begin(), p.end());
      }
    }

    // 2. Bin rule per head; candidates = the combined bin point, then the best single passing points.
    std::vector<std::vector<Probe>> cands(static_cast<size_t>(headsQ_));
    std::vector<std::string> decision(static_cast<size_t>(headsQ_));
    std::vector<bool> dense(static_cast<size_t>(headsQ_), false);
    for (int64_t h : heads_) {
      std::vector<TunePoint> tp;
      std::vector<const ThetaPoint*> passed;
      for (const ThetaPoint& p : points[size_t(h)])
        if (p.passed) {
          tp.push_back({p.theta, p.sel, 0.0, p.stage1});
          passed.push_back(&p);
        }
      work_[size_t(h)].thetaPoints = points[size_t(h)];
      const BinChoice bin = chooseBin(tp, o_.binStart, o_.binWidth);
      if (!bin.found || bin.meanSparsity <= o_.minSparsity) {
        dense[size_t(h)] = true;
        decision[size_t(h)] = !bin.found ? "dense: no θ met l1 on any entry"
                                         : "dense: bin [" + fmt(bin.binLow) + ", " + fmt(bin.binHigh) +
                                               ") mean sparsity " + fmt(bin.meanSparsity) + " <= " + fmt(o_.minSparsity);
        continue;
      }
      decision[size_t(h)] = "bin [" + fmt(bin.binLow) + ", " + fmt(bin.binHigh) + ") of " + std::to_string(bin.count) +
                            " points, mean sparsity " + fmt(bin.meanSparsity) + ": θ=" + fmt(bin.theta) + " " +
                            (o_.mode == SelectMode::Cdf ? "τ=" : "topk=") + fmt(bin.sel);
      cands[size_t(h)].push_back(Probe{probeParams(o_, bin.theta, bin.sel, kNoPvSkipLambda), ProbePhase::Verify, o_.l1});
      std::stable_sort(passed.begin(), passed.end(), [](const ThetaPoint* a, const ThetaPoint* b) {
        return a->stage1 > b->stage1 || (a->stage1 == b->stage1 && a->l1 < b->l1);
      });
      for (const ThetaPoint* p : passed) {
        if (int(cands[size_t(h)].size()) > o_.fallbackTries) break;
        const HeadParams hp = probeParams(o_, p->theta, p->sel, kNoPvSkipLambda);
        const bool seen = std::any_of(cands[size_t(h)].begin(), cands[size_t(h)].end(),
                                      [&](const Probe& c) { return c.params == hp; });
        if (!seen) cands[size_t(h)].push_back(Probe{hp, ProbePhase::Verify, o_.l1});
      }
    }

    // 3. Re-evaluate the candidates on every entry; the first that meets l1 everywhere is kept.
    std::vector<Chosen> verified = verifyAcross(cands, false, 0.7, 0.8);
    std::vector<HeadParams> base(static_cast<size_t>(headsQ_));
    for (int64_t h : heads_) {
      if (dense[size_t(h)]) continue;
      const Chosen& c = verified[size_t(h)];
      if (c.index < 0) {
        dense[size_t(h)] = true;
        decision[size_t(h)] += "; neither the bin point nor " + std::to_string(cands[size_t(h)].size() - 1) +
                               " single points met l1 on every entry: dense";
        continue;
      }
      base[size_t(h)] = cands[size_t(h)][size_t(c.index)].params;
      if (c.index > 0)
        decision[size_t(h)] += "; bin point failed l1 on some entry, fell back to single point θ=" +
                               fmt(base[size_t(h)].theta) + " " + (o_.mode == SelectMode::Cdf ? "τ=" : "topk=") +
                               fmt(selOf(base[size_t(h)]));
      double mean = 0;
      for (const Measured& m : c.perEntry) mean += m.stage1;
      mean /= double(std::max<size_t>(1, c.perEntry.size()));
      if (mean <= o_.minSparsity) {
        dense[size_t(h)] = true;
        decision[size_t(h)] += "; achieved mean sparsity " + fmt(mean) + " <= " + fmt(o_.minSparsity) + ": dense";
      }
    }

    // 4. λ per entry for the chosen (θ, τ); combined λ = the largest (most conservative) of them.
    std::vector<double> lambdaComb(static_cast<size_t>(headsQ_), o_.lambdaMin);
    std::vector<bool> lambdaMissing(static_cast<size_t>(headsQ_), false);
    if (o_.tunePv) {
      for (size_t e = 0; e < nE; ++e) {
        std::vector<std::unique_ptr<LambdaSearch>> owned(static_cast<size_t>(headsQ_));
        std::vector<HeadTask*> tasks(static_cast<size_t>(headsQ_), nullptr);
        for (int64_t h : heads_) {
          if (dense[size_t(h)]) continue;
          owned[size_t(h)] = std::make_unique<LambdaSearch>(o_, base[size_t(h)], o_.l2);
          tasks[size_t(h)] = owned[size_t(h)].get();
        }
        auto fraction = [&] {
          double f = 0;
          int n = 0;
          for (int64_t h : heads_)
            if (owned[size_t(h)]) {
              f += owned[size_t(h)]->fraction();
              ++n;
            }
          return 0.8 + 0.15 * (double(e) + (n ? f / n : 1.0)) / double(nE);
        };
        lockstep(int32_t(e), tasks, nullptr, fraction);
        for (int64_t h : heads_) {
          if (!owned[size_t(h)]) continue;
          if (owned[size_t(h)]->found())
            lambdaComb[size_t(h)] = std::max(lambdaComb[size_t(h)], owned[size_t(h)]->bestParams().lambda);
          else
            lambdaMissing[size_t(h)] = true;
        }
      }
    }

    // 5. Final verification of the exported values on every entry (dense heads: their dense run).
    std::vector<std::vector<Probe>> finals(static_cast<size_t>(headsQ_));
    for (int64_t h : heads_) {
      auto& f = finals[size_t(h)];
      if (dense[size_t(h)]) {
        f.push_back(Probe{denseParams(o_), ProbePhase::Final, o_.l1});
        continue;
      }
      HeadParams p = base[size_t(h)];
      const double budget = o_.tunePv ? o_.l2 : o_.l1;
      if (o_.tunePv) {
        p.lambda = lambdaMissing[size_t(h)] ? o_.lambdaMax : lambdaComb[size_t(h)];
        f.push_back(Probe{p, ProbePhase::Final, budget});
        if (p.lambda != o_.lambdaMax) {
          p.lambda = o_.lambdaMax;
          f.push_back(Probe{p, ProbePhase::Final, budget});
        }
      } else {
        p.lambda = o_.fixedLambda;
        f.push_back(Probe{p, ProbePhase::Final, budget});
      }
      f.push_back(Probe{base[size_t(h)], ProbePhase::Final, o_.l1});  // PV skip off: verified in step 3
      f.push_back(Probe{denseParams(o_), ProbePhase::Final, o_.l1});
    }
    std::vector<Chosen> fin = verifyAcross(finals, true, 0.95, 1.0);
    for (int64_t h : heads_) {
      TunedHead& th = work_[size_t(h)];
      const Chosen& c = fin[size_t(h)];
      const Probe& p = finals[size_t(h)][size_t(std::max(0, c.index))];
      th.params = p.params;
      th.isSparse = !p.params.dense;
      if (!dense[size_t(h)]) {
        if (p.params.dense)
          decision[size_t(h)] += "; final verification failed: dense";
        else if (p.params.lambda == kNoPvSkipLambda)
          decision[size_t(h)] += "; λ verification failed: PV skip disabled";
        else if (o_.tunePv)
          decision[size_t(h)] += "; λ=" + fmt(p.params.lambda) + " (largest of the per-entry λ" +
                                 (c.index > 0 ? ", failed → λ max" : "") + ")";
      }
      th.decision = decision[size_t(h)];
      th.perEntry.clear();
      th.stage1Sparsity = th.totalSparsity = th.l1 = th.l1Sparse = th.l1Quant = 0;
      for (size_t e = 0; e < c.perEntry.size(); ++e) {
        const Measured& m = c.perEntry[e];
        th.perEntry.push_back(EntryAchieved{input_.entries[e].name, m.stage1, m.total, m.l1});
        th.stage1Sparsity += m.stage1;
        th.totalSparsity += m.total;
        th.l1 = std::max(th.l1, m.l1);
        th.l1Sparse = std::max(th.l1Sparse, m.l1Sparse);
        th.l1Quant = std::max(th.l1Quant, m.l1Quant);
      }
      if (!c.perEntry.empty()) {
        th.stage1Sparsity /= double(c.perEntry.size());
        th.totalSparsity /= double(c.perEntry.size());
      }
    }
    unitsDoneHere_ = int64_t(heads_.size() * nE);
    for (int64_t h : heads_) publish(h);
  }

  Engine& engine_;
  const TuneOptions& o_;
  const TuneCallbacks& cb_;
  TuneResult& result_;
  const TuneGroupInput& input_;
  TunedGroup& group_;
  Clock::time_point start_;
  int64_t unitsBefore_, unitsTotal_;
  int64_t unitsDoneHere_ = 0;
  int current_ = -1;
  int64_t headsQ_ = 0;
  std::vector<int64_t> heads_;
  std::vector<TunedHead> work_;
  ProbePhase phase_ = ProbePhase::Select;
};

}  // namespace

std::vector<double> defaultThetaGrid() {
  std::vector<double> g;
  for (int i = -16; i < 16; ++i) g.push_back(double(i) / 16.0);
  return g;
}

void TuneOptions::validate(const std::string& where) const {
  auto bad = [&](const std::string& what) { throw Error(where, what); };
  if (!(l1 > 0) || !std::isfinite(l1)) bad("l1 must be a positive number (got " + fmt(l1) + ")");
  if (tunePv && (!(l2 > l1) || !std::isfinite(l2)))
    bad("l2 must be larger than l1 when λ is tuned (got l1 = " + fmt(l1) + ", l2 = " + fmt(l2) + ")");
  if (thetaGrid.empty()) bad("the θ grid is empty");
  for (double t : thetaGrid)
    if (!std::isfinite(t)) bad("the θ grid holds a non-finite value");
  if (!(selTolerance > 0 && selTolerance < 1)) bad("the τ / top-k tolerance must be in (0, 1)");
  if (!(lambdaMin >= 0 && lambdaMax > lambdaMin && std::isfinite(lambdaMax)))
    bad("the λ range must satisfy 0 <= min < max");
  if (!(lambdaTolerance > 0)) bad("the λ tolerance must be positive");
  if (!(fixedLambda >= 0) || !std::isfinite(fixedLambda)) bad("the fixed λ must be >= 0");
  if (!(binWidth > 0)) bad("the bin width must be positive");
  if (fallbackTries < 0) bad("fallbackTries must be >= 0");
}

const char* toString(ProbePhase p) {
  switch (p) {
    case ProbePhase::Select: return "select";
    case ProbePhase::Verify: return "verify";
    case ProbePhase::Lambda: return "lambda";
    case ProbePhase::Final: return "final";
  }
  return "?";
}

const TunedHead* TunedGroup::find(int64_t head) const {
  for (const TunedHead& h : heads)
    if (h.head == head) return &h;
  return nullptr;
}

int64_t TuneResult::headsFinished() const {
  int64_t n = 0;
  for (const TunedGroup& g : groups) n += int64_t(g.heads.size());
  return n;
}

TuneInput TuneInput::fromData(std::shared_ptr<const EntryData> data) {
  TuneInput in;
  in.name = data->info.name;
  in.layer = data->info.layer;
  in.headsQ = data->info.headsQ;
  in.load = [data] { return data; };
  return in;
}

std::vector<TuneGroupInput> makeGroups(const std::vector<TuneInput>& entries, bool byLayer) {
  std::vector<TuneGroupInput> groups;
  std::map<int64_t, size_t> byLayerIndex;
  for (const TuneInput& e : entries) {
    if (byLayer && e.layer) {
      auto it = byLayerIndex.find(*e.layer);
      if (it != byLayerIndex.end()) {
        groups[it->second].entries.push_back(e);
        continue;
      }
      byLayerIndex[*e.layer] = groups.size();
      groups.push_back(TuneGroupInput{"layer " + std::to_string(*e.layer), e.layer, {e}});
      continue;
    }
    groups.push_back(TuneGroupInput{e.name, e.layer, {e}});
  }
  // A layer with a single entry is just that entry.
  for (TuneGroupInput& g : groups)
    if (g.entries.size() == 1) g.name = g.entries[0].name;
  return groups;
}

TuneResult tune(Engine& engine, const std::vector<TuneGroupInput>& groups, const TuneOptions& options,
                const TuneCallbacks& callbacks) {
  options.validate("tune options");
  TuneResult result;
  result.options = options;
  result.engine = engine.name();
  const auto start = Clock::now();
  int64_t unitsTotal = 0;
  for (const TuneGroupInput& g : groups) {
    if (g.entries.empty()) throw Error("tune " + g.name, "the group has no entries");
    const int64_t heads = options.heads.empty()
                              ? g.entries[0].headsQ
                              : int64_t(std::set<int64_t>(options.heads.begin(), options.heads.end()).size());
    unitsTotal += heads * int64_t(g.entries.size());
  }
  int64_t unitsBefore = 0;
  for (const TuneGroupInput& g : groups) {
    result.groups.emplace_back();
    TunedGroup& group = result.groups.back();
    const auto t0 = Clock::now();
    try {
      GroupRunner runner(engine, result.options, callbacks, result, g, group, start, unitsBefore, unitsTotal);
      runner.run();
    } catch (const Cancelled&) {
      group.elapsedSeconds = secondsSince(t0);
      group.complete = false;
      result.cancelled = true;
      result.elapsedSeconds = secondsSince(start);
      return result;
    }
    group.elapsedSeconds = secondsSince(t0);
    if (callbacks.groupFinished) callbacks.groupFinished(group);
    unitsBefore += int64_t(group.heads.size() * g.entries.size());
  }
  result.elapsedSeconds = secondsSince(start);
  return result;
}

TuneResult tuneEntry(Engine& engine, std::shared_ptr<const EntryData> entry, const TuneOptions& options,
                     const TuneCallbacks& callbacks) {
  if (!entry) throw Error("tune", "no entry given");
  std::vector<TuneGroupInput> groups = {TuneGroupInput{entry->info.name, entry->info.layer, {TuneInput::fromData(entry)}}};
  return tune(engine, groups, options, callbacks);
}

BinChoice chooseBin(const std::vector<TunePoint>& points, double start, double width) {
  BinChoice best;
  std::map<int, std::vector<const TunePoint*>> bins;
  for (const TunePoint& p : points) {
    // The small epsilon keeps grid values that sit exactly on a bin edge (θ = −14/16) in the upper bin
    // despite rounding in (θ − start) / width.
    const int b = int(std::floor((p.theta - start) / width + 1e-9));
    bins[b].push_back(&p);
  }
  for (const auto& [b, pts] : bins) {
    double sum = 0;
    for (const TunePoint* p : pts) sum += p->sparsity;
    if (best.found && !(sum > best.sumSparsity)) continue;  // ties keep the lower bin (map order)
    best.found = true;
    best.bin = b;
    best.binLow = start + b * width;
    best.binHigh = start + (b + 1) * width;
    best.sumSparsity = sum;
    best.count = int(pts.size());
    best.meanSparsity = sum / double(pts.size());
    best.theta = pts[0]->theta;
    best.sel = pts[0]->sel;
    best.lambda = pts[0]->lambda;
    for (const TunePoint* p : pts) {
      best.theta = std::max(best.theta, p->theta);
      best.sel = std::max(best.sel, p->sel);
      best.lambda = std::max(best.lambda, p->lambda);
    }
  }
  return best;
}

}  // namespace sparge::core
