// Tuning of one group: the engine-facing lockstep loop, progress, and the stages of the search (one entry:
// each head's SingleEntrySearch; entries together: θ sweep on every entry, bin rule, verification of the
// candidates, λ per entry, final verification).
#include "tuner_group.h"

#include <algorithm>
#include <cmath>

#include "sparge/core/digest.h"
#include "sparge/core/error.h"
#include "sparge/core/method_knob.h"
#include "sparge/core/run_request.h"
#include "tuner_method.h"

namespace sparge::core::tuning {
namespace {

template <class Task>
std::vector<HeadTask*> rawTasks(const std::vector<std::unique_ptr<Task>>& owned) {
  std::vector<HeadTask*> tasks;
  for (const auto& t : owned) tasks.push_back(t.get());
  return tasks;
}

// Mean progress of the tasks that exist (1 when there are none).
double meanFraction(const std::vector<HeadTask*>& tasks) {
  double sum = 0;
  int n = 0;
  for (const HeadTask* t : tasks)
    if (t) {
      sum += t->fraction();
      ++n;
    }
  return n ? sum / n : 1.0;
}

// The share of the dense attention inside the computed blocks, accumulated over batch items (mass per block
// is the mean over the tile's query rows, so each block counts with its row count).
void addRecall(Measured& m, const HeadResult& hr, int64_t nQ, int blockQ) {
  if (hr.refBlockMass.size() != hr.blockMask.size() || hr.nk == 0) return;
  double kept = 0, total = 0;
  for (size_t x = 0; x < hr.blockMask.size(); ++x) {
    const int i = int(x / size_t(hr.nk));
    const double rows = double(std::min<int64_t>(blockQ, nQ - int64_t(i) * blockQ));
    total += hr.refBlockMass[x] * rows;
    if (hr.blockMask[x]) kept += hr.refBlockMass[x] * rows;
  }
  if (total > 0) m.recall = (std::isfinite(m.recall) ? m.recall : 0.0) + kept / total;
}

}  // namespace

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

GroupRunner::GroupRunner(Engine& engine, const TuneOptions& o, const TuneCallbacks& cb, TuneResult& result,
                         const TuneGroupInput& input, TunedGroup& group, ProgressBase progress)
    : engine_(engine), o_(o), cb_(cb), result_(result), input_(input), group_(group), progress_(progress) {}

void GroupRunner::run() {
  group_.name = input_.name;
  group_.layer = input_.layer;
  for (const TuneInput& e : input_.entries)
    if (std::find(group_.entries.begin(), group_.entries.end(), e.name) == group_.entries.end())
      group_.entries.push_back(e.name);
  inputs_.assign(input_.entries.size(), TunedOn{});
  // The first entry fixes the head count (others are checked on load).
  setEntry(0);
  group_.headsQ = headsQ_;
  exact_.assign(size_t(headsQ_), 0);
  exactCause_.assign(size_t(headsQ_), TuneDecision::ExactCause::None);
  quantL1_.assign(size_t(headsQ_), std::numeric_limits<double>::quiet_NaN());
  quantQkL1_ = quantL1_;
  heads_ = resolveRunHeads(engine_.entry()->info, probeConfig(), o_.heads);
  work_.assign(size_t(headsQ_), TunedHead{});
  for (int64_t h : heads_) work_[size_t(h)].head = h;
  if (o_.numerics != Numerics::None) scanQuantization();
  if (input_.entries.size() == 1)
    runSingle();
  else if (o_.method == Method::SpargeAttn)
    runTogether();
  else
    throw Error("tune " + input_.name,
                std::string("entries tuned together (--group-by-layer) use SpargeAttn's bin "
                            "rule; tune ") +
                    methodLabel(o_.method) + " per entry");
  group_.complete = true;
  report(1.0);
}

// ---- evaluation ----

void GroupRunner::setEntry(size_t idx) {
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
  if (inputs_[idx].entry.empty()) {
    inputs_[idx] = TunedOn{in.capture, in.name, data->digest.empty() ? entryDigest(*data) : data->digest};
    group_.tunedOn.clear();
    for (const TunedOn& t : inputs_)
      if (!t.entry.empty()) group_.tunedOn.push_back(t);
  }
  useEntry(std::move(data));
  current_ = int(idx);
}

void GroupRunner::useEntry(std::shared_ptr<const EntryData> data) {
  engine_.setEntry(std::move(data));
  current_ = -1;
}

// The run-wide settings of every probe; per-head parameters are filled in by the probes.
RunConfig GroupRunner::probeConfig() const {
  RunConfig cfg;
  cfg.method = o_.method;
  cfg.geometry = o_.geometry;
  cfg.numerics = o_.numerics;
  cfg.smoothK = o_.smoothK;
  cfg.sink = o_.sink;
  cfg.diagonal = o_.diagonal;
  cfg.perHead.assign(size_t(headsQ_), cfg.defaults);
  if (std::find(exact_.begin(), exact_.end(), 1) != exact_.end()) {
    cfg.perHeadNumerics.assign(size_t(headsQ_), o_.numerics);
    for (size_t h = 0; h < exact_.size(); ++h)
      if (exact_[h]) cfg.perHeadNumerics[h] = Numerics::None;
  }
  return cfg;
}

// Evaluates the next probe of every unfinished task in one engine run per step, until all are done.
// `onDone(h)` is called once when head h's task finishes; `progressOf` maps the tasks' mean progress
// onto the group's bar.
void GroupRunner::lockstep(int32_t entry, const std::vector<HeadTask*>& tasks,
                           const std::function<void(int64_t)>& onDone,
                           const std::function<double(double)>& progressOf) {
  setEntry(size_t(entry));
  std::vector<bool> reported(tasks.size(), false);
  for (;;) {
    if (cb_.cancel && cb_.cancel->load()) throw Cancelled();
    RunConfig cfg = probeConfig();
    std::vector<Probe> probes(tasks.size());
    std::vector<int64_t> heads;
    for (size_t h = 0; h < tasks.size(); ++h) {
      if (!tasks[h]) continue;
      if (tasks[h]->next(probes[h])) {
        heads.push_back(int64_t(h));
        cfg.perHead[h] = probes[h].params;
      } else if (!reported[h]) {
        reported[h] = true;
        if (onDone) onDone(int64_t(h));
      }
    }
    if (heads.empty()) return;
    const std::map<int64_t, Measured> measured = evaluate(cfg, heads);
    for (int64_t h : heads) {
      const Probe& p = probes[size_t(h)];
      const Measured& m = measured.at(h);
      const bool pass = std::isfinite(m.l1) && m.l1 < p.budget;
      tasks[size_t(h)]->feed(p, m, pass);
      recordProbe(h, entry, p, m, pass);
    }
    report(progressOf(meanFraction(tasks)));
  }
}

// One engine run; per head, the figures summed over the batch items.
std::map<int64_t, Measured> GroupRunner::evaluate(const RunConfig& config, const std::vector<int64_t>& heads,
                                                  bool quantBreakdown) {
  RunOptions ro;
  ro.cancel = cb_.cancel;
  ro.computeError = true;
  ro.quantBreakdown = quantBreakdown;
  ro.heads = heads;
  const EntryResult res = engine_.run(config, ro);
  ++result_.probes;
  std::map<int64_t, std::pair<SparsityCounts, ErrorSums>> sums;
  std::map<int64_t, std::pair<ErrorSums, ErrorSums>> splitSums;  // sparse alone, quantization alone
  std::map<int64_t, ErrorSums> qkSums;                           // the INT8 Q·Kᵀ part
  std::map<int64_t, Measured> measured;
  for (const HeadResult& hr : res.heads) {
    auto& s = sums[hr.head];
    s.first += hr.sparsity;
    s.second += hr.error;
    splitSums[hr.head].first += hr.errorSparse;
    splitSums[hr.head].second += hr.errorQuant;
    qkSums[hr.head] += hr.errorQuantQk;
    Measured& m = measured[hr.head];
    addRecall(m, hr, res.info.tokensQ, config.geometry.blockQ);
    m.simQ.insert(m.simQ.end(), hr.selfSimQ.begin(), hr.selfSimQ.end());
    m.simK.insert(m.simK.end(), hr.selfSimK.begin(), hr.selfSimK.end());
  }
  for (int64_t h : heads) {
    auto it = sums.find(h);
    if (it == sums.end())
      throw Error("tune " + input_.name, "the engine returned no result for head " + std::to_string(h));
    Measured& m = measured[h];
    m.stage1 = it->second.first.stage1();
    m.total = it->second.first.total();
    m.l1 = it->second.second.l1();
    m.l1Sparse = splitSums[h].first.l1();
    m.l1Quant = splitSums[h].second.l1();
    if (qkSums[h].count > 0) m.l1QuantQk = qkSums[h].l1();
  }
  return measured;
}

void GroupRunner::recordProbe(int64_t head, int32_t entry, const Probe& p, const Measured& m, bool pass) {
  TunedHead& th = work_[size_t(head)];
  ++th.probes;
  TuneProbe tp;
  tp.entry = entry;
  tp.phase = p.phase;
  tp.dense = p.params.dense;
  tp.theta = float(p.params.theta);
  tp.sel = float(o_.method == Method::SpargeAttn
                     ? selOf(p.params)
                     : knobValue(o_.method, p.params, engine_.entry()->info, o_.geometry));
  tp.lambda = float(p.params.lambda);
  tp.stage1 = float(m.stage1);
  tp.total = float(m.total);
  tp.l1 = float(m.l1);
  tp.pass = pass;
  th.trace.push_back(tp);
  phase_ = p.phase;
}

// Runs one candidate list per head on every entry (candidate k of every unresolved head in round k); a
// head resolves at the first candidate that passes its budget on every entry. With `acceptLast`, the last
// candidate is taken even if it fails.
std::vector<GroupRunner::Chosen> GroupRunner::verifyAcross(const std::vector<std::vector<Probe>>& candidates,
                                                           bool acceptLast, ProgressSpan span) {
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
      for (int64_t h : heads_) {
        if (!open[size_t(h)] || k >= candidates[size_t(h)].size()) continue;
        owned[size_t(h)] = std::make_unique<CandidateList>(std::vector<Probe>{candidates[size_t(h)][k]});
        any = true;
      }
      if (!any) break;
      const double f = span.at(double(k * nE + e) / double(rounds * nE));
      lockstep(int32_t(e), rawTasks(owned), nullptr, [f](double) { return f; });
      for (int64_t h : heads_) {
        if (!owned[size_t(h)] || owned[size_t(h)]->results().empty()) continue;
        const auto& r = owned[size_t(h)]->results()[0];
        figures[size_t(h)].push_back(r.first);
        if (!r.second) allPass[size_t(h)] = false;
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

// ---- progress and results ----

void GroupRunner::report(double groupFraction) {
  if (!cb_.progress) return;
  TuneProgress pr;
  pr.unitsTotal = progress_.unitsTotal;
  pr.unitsDone = progress_.unitsBefore + unitsDoneHere_;
  const double groupUnits = double(heads_.size() * input_.entries.size());
  pr.fraction = pr.unitsTotal > 0
                    ? std::min(1.0, (double(progress_.unitsBefore) + groupFraction * groupUnits) /
                                        double(pr.unitsTotal))
                    : 1.0;
  pr.elapsedSeconds = secondsSince(progress_.start);
  pr.etaSeconds = pr.fraction > 0.01 ? pr.elapsedSeconds * (1.0 - pr.fraction) / pr.fraction : -1.0;
  pr.group = input_.name;
  pr.phase = phase_;
  pr.probes = result_.probes;
  cb_.progress(pr);
}

void GroupRunner::publish(int64_t h) {
  recordExact(work_[size_t(h)]);
  group_.heads.push_back(std::move(work_[size_t(h)]));
  std::sort(group_.heads.begin(), group_.heads.end(),
            [](const TunedHead& a, const TunedHead& b) { return a.head < b.head; });
  if (cb_.headFinished) cb_.headFinished(group_, *group_.find(h));
}

// ---- one entry ----

void GroupRunner::runSingle() {
  const std::vector<double> grid = sortedGrid(o_.thetaGrid);
  std::vector<std::unique_ptr<SingleEntrySearch>> owned(static_cast<size_t>(headsQ_));
  for (int64_t h : heads_)
    owned[size_t(h)] =
        o_.method == Method::SpargeAttn
            ? std::make_unique<SingleEntrySearch>(o_, grid, work_[size_t(h)])
            : std::make_unique<SingleEntrySearch>(
                  o_, std::make_unique<KnobSweep>(o_, engine_.entry()->info, 0), work_[size_t(h)]);
  const std::string name = input_.entries[0].name;
  auto onDone = [&](int64_t h) {
    TunedHead& th = work_[size_t(h)];
    th.perEntry = {EntryAchieved{name, th.stage1Sparsity, th.totalSparsity, th.l1}};
    ++unitsDoneHere_;
    publish(h);
  };
  lockstep(0, rawTasks(owned), onDone, [](double f) { return f; });
}

// ---- entries tuned together ----

void GroupRunner::runTogether() {
  std::vector<TogetherHead> heads(static_cast<size_t>(headsQ_));
  for (int64_t h : heads_) {
    TuneDecision& d = heads[size_t(h)].decision;
    d.mode = o_.mode;
    d.entries = int(input_.entries.size());
    d.l1Budget = o_.l1;
    d.l2Budget = o_.l2;
    d.minSparsity = o_.minSparsity;
  }
  sweepEntries(heads);
  for (int64_t h : heads_) {
    work_[size_t(h)].thetaPoints = heads[size_t(h)].points;
    applyBinRule(heads[size_t(h)]);
  }
  verifyCandidates(heads);
  if (o_.tunePv) searchLambda(heads);
  verifyFinals(heads);
  unitsDoneHere_ = int64_t(heads_.size() * input_.entries.size());
  for (int64_t h : heads_) publish(h);
}

// Stage 1: θ sweep with τ / top-k bisection on every entry, PV skip off.
void GroupRunner::sweepEntries(std::vector<TogetherHead>& heads) {
  const std::vector<double> grid = sortedGrid(o_.thetaGrid);
  const size_t nE = input_.entries.size();
  for (size_t e = 0; e < nE; ++e) {
    std::vector<std::unique_ptr<ThetaSweep>> owned(static_cast<size_t>(headsQ_));
    for (int64_t h : heads_) owned[size_t(h)] = std::make_unique<ThetaSweep>(o_, int32_t(e), grid);
    lockstep(
        int32_t(e), rawTasks(owned), [&](int64_t) { ++unitsDoneHere_; },
        [&](double f) { return kTogetherSweep.at((double(e) + f) / double(nE)); });
    for (int64_t h : heads_) {
      const auto& p = owned[size_t(h)]->points();
      heads[size_t(h)].points.insert(heads[size_t(h)].points.end(), p.begin(), p.end());
    }
  }
}

// Stage 2: the bin rule over every entry's passing points; candidates = the combined bin point, then the
// best single passing points (largest sparsity, then smallest L1).
void GroupRunner::applyBinRule(TogetherHead& th) const {
  std::vector<TunePoint> tp;
  std::vector<const ThetaPoint*> passed;
  for (const ThetaPoint& p : th.points)
    if (p.passed) {
      tp.push_back({p.theta, p.sel, 0.0, p.stage1});
      passed.push_back(&p);
    }
  const BinChoice bin = chooseBin(tp, o_.binStart, o_.binWidth);
  TuneDecision& d = th.decision;
  if (!bin.found) {
    th.dense = true;
    d.denseCause = TuneDecision::DenseCause::NoPointMetL1;
    return;
  }
  d.basis = TuneDecision::Basis::BinPoint;
  d.binLow = bin.binLow;
  d.binHigh = bin.binHigh;
  d.binPoints = bin.count;
  d.binMeanSparsity = bin.meanSparsity;
  d.theta = bin.theta;
  d.sel = bin.sel;
  if (bin.meanSparsity <= o_.minSparsity) {
    th.dense = true;
    d.denseCause = TuneDecision::DenseCause::LowSparsity;
    return;
  }
  th.candidates.push_back(
      Probe{probeParams(o_, bin.theta, bin.sel, kNoPvSkipLambda), ProbePhase::Verify, o_.l1});
  std::stable_sort(passed.begin(), passed.end(), [](const ThetaPoint* a, const ThetaPoint* b) {
    return a->stage1 > b->stage1 || (a->stage1 == b->stage1 && a->l1 < b->l1);
  });
  for (const ThetaPoint* p : passed) {
    if (int(th.candidates.size()) > o_.fallbackTries) break;
    const HeadParams hp = probeParams(o_, p->theta, p->sel, kNoPvSkipLambda);
    const bool seen = std::any_of(th.candidates.begin(), th.candidates.end(),
                                  [&](const Probe& c) { return c.params == hp; });
    if (!seen) th.candidates.push_back(Probe{hp, ProbePhase::Verify, o_.l1});
  }
}

// Stage 3: the candidates re-evaluated on every entry; the first that meets l1 everywhere is kept.
void GroupRunner::verifyCandidates(std::vector<TogetherHead>& heads) {
  std::vector<std::vector<Probe>> cands(static_cast<size_t>(headsQ_));
  for (int64_t h : heads_) cands[size_t(h)] = heads[size_t(h)].candidates;
  const std::vector<Chosen> verified = verifyAcross(cands, false, kTogetherVerify);
  for (int64_t h : heads_) {
    TogetherHead& th = heads[size_t(h)];
    if (th.dense) continue;
    TuneDecision& d = th.decision;
    const Chosen& c = verified[size_t(h)];
    if (c.index < 0) {
      th.dense = true;
      d.denseCause = TuneDecision::DenseCause::NoCandidateMetL1;
      d.singlePointsTried = int(th.candidates.size()) - 1;
      continue;
    }
    th.base = th.candidates[size_t(c.index)].params;
    if (c.index > 0) {
      d.basis = TuneDecision::Basis::FallbackPoint;
      d.theta = th.base.theta;
      d.sel = selOf(th.base);
    }
    double mean = 0;
    for (const Measured& m : c.perEntry) mean += m.stage1;
    mean /= double(std::max<size_t>(1, c.perEntry.size()));
    d.achievedSparsity = mean;
    if (mean <= o_.minSparsity) {
      th.dense = true;
      d.denseCause = TuneDecision::DenseCause::LowAchievedSparsity;
    }
  }
}

// Stage 4: λ bisection per entry for the verified point; the combined λ is the largest (most
// conservative) of them.
void GroupRunner::searchLambda(std::vector<TogetherHead>& heads) {
  const size_t nE = input_.entries.size();
  for (int64_t h : heads_) heads[size_t(h)].lambda = o_.lambdaMin;
  for (size_t e = 0; e < nE; ++e) {
    std::vector<std::unique_ptr<LambdaSearch>> owned(static_cast<size_t>(headsQ_));
    for (int64_t h : heads_)
      if (!heads[size_t(h)].dense)
        owned[size_t(h)] = std::make_unique<LambdaSearch>(o_, heads[size_t(h)].base, o_.l2);
    lockstep(int32_t(e), rawTasks(owned), nullptr,
             [&](double f) { return kTogetherLambda.at((double(e) + f) / double(nE)); });
    for (int64_t h : heads_) {
      const LambdaSearch* s = owned[size_t(h)].get();
      if (!s) continue;
      TogetherHead& th = heads[size_t(h)];
      if (s->found())
        th.lambda = std::max(th.lambda, s->bestParams().lambda);
      else
        th.lambdaMissing = true;
    }
  }
}

// The exported candidates of a head, most PV skipping first; the dense configuration always passes last.
void GroupRunner::planFinals(TogetherHead& th) const {
  auto& f = th.finals;
  if (th.dense) {
    f.push_back(Probe{denseParams(o_), ProbePhase::Final, o_.l1});
    return;
  }
  HeadParams p = th.base;
  const double budget = o_.tunePv ? o_.l2 : o_.l1;
  if (o_.tunePv) {
    p.lambda = th.lambdaMissing ? o_.lambdaMax : th.lambda;
    f.push_back(Probe{p, ProbePhase::Final, budget});
    if (p.lambda != o_.lambdaMax) {
      p.lambda = o_.lambdaMax;
      f.push_back(Probe{p, ProbePhase::Final, budget});
    }
  } else {
    p.lambda = o_.fixedLambda;
    f.push_back(Probe{p, ProbePhase::Final, budget});
  }
  f.push_back(Probe{th.base, ProbePhase::Final, o_.l1});  // PV skip off: verified in stage 3
  f.push_back(Probe{denseParams(o_), ProbePhase::Final, o_.l1});
}

// Stage 5: final verification of the exported values on every entry (dense heads: their dense run).
void GroupRunner::verifyFinals(std::vector<TogetherHead>& heads) {
  std::vector<std::vector<Probe>> finals(static_cast<size_t>(headsQ_));
  for (int64_t h : heads_) {
    planFinals(heads[size_t(h)]);
    finals[size_t(h)] = heads[size_t(h)].finals;
  }
  const std::vector<Chosen> fin = verifyAcross(finals, true, kTogetherFinal);
  for (int64_t h : heads_) recordFinal(h, heads[size_t(h)], fin[size_t(h)]);
}

void GroupRunner::recordFinal(int64_t h, TogetherHead& th, const Chosen& c) {
  TunedHead& out = work_[size_t(h)];
  const Probe& p = th.finals[size_t(std::max(0, c.index))];
  out.params = p.params;
  out.isSparse = !p.params.dense;
  TuneDecision& d = th.decision;
  using L = TuneDecision::LambdaSource;
  if (!th.dense) {
    if (p.params.dense) {
      d.denseCause = TuneDecision::DenseCause::FinalCheckFailed;
    } else if (p.params.lambda == kNoPvSkipLambda) {
      d.lambdaSource = L::PvSkipOff;
    } else if (!o_.tunePv) {
      d.lambdaSource = L::Fixed;
    } else {
      d.lambdaSource = c.index > 0 || th.lambdaMissing ? L::Max : L::LargestOfEntries;
    }
    if (d.lambdaSource != L::None) d.lambda = p.params.lambda;
  }
  out.decision = d;
  out.perEntry.clear();
  out.stage1Sparsity = out.totalSparsity = out.l1 = out.l1Sparse = out.l1Quant = 0;
  for (size_t e = 0; e < c.perEntry.size(); ++e) {
    const Measured& m = c.perEntry[e];
    out.perEntry.push_back(EntryAchieved{input_.entries[e].name, m.stage1, m.total, m.l1});
    out.stage1Sparsity += m.stage1;
    out.totalSparsity += m.total;
    out.l1 = std::max(out.l1, m.l1);
    out.l1Sparse = std::max(out.l1Sparse, m.l1Sparse);
    out.l1Quant = std::max(out.l1Quant, m.l1Quant);
  }
  if (!c.perEntry.empty()) {
    out.stage1Sparsity /= double(c.perEntry.size());
    out.totalSparsity /= double(c.perEntry.size());
  }
}

}  // namespace sparge::core::tuning
