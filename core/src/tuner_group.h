// Tuning of one group (one entry, or the entries of a layer tuned together): loads entries, evaluates the
// next probe of every unfinished head in one engine run, and runs the stages of the search in order.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <vector>

#include "sparge/core/tuner.h"
#include "tuner_search.h"

namespace sparge::core::tuning {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0);

// Where this group sits in the progress of the whole tune() call.
struct ProgressBase {
  Clock::time_point start;
  int64_t unitsBefore = 0;  // (entry, head) pairs of the groups before this one
  int64_t unitsTotal = 0;
};

class GroupRunner {
 public:
  GroupRunner(Engine& engine, const TuneOptions& o, const TuneCallbacks& cb, TuneResult& result,
              const TuneGroupInput& input, TunedGroup& group, ProgressBase progress);
  void run();

 private:
  // The state of one head while entries are tuned together.
  struct TogetherHead {
    std::vector<ThetaPoint> points;  // every entry's θ points
    TuneDecision decision;
    bool dense = false;
    std::vector<Probe> candidates;  // the bin point, then the best single points
    HeadParams base;                // the verified (θ, τ / top-k) point, PV skip off
    double lambda = 0;              // the largest of the per-entry λ results
    bool lambdaMissing = false;     // some entry had no passing λ
    std::vector<Probe> finals;      // exported candidates, most PV skipping first
  };
  // A candidate list's outcome over every entry: the chosen index (-1: none) and its per-entry figures.
  struct Chosen {
    int index = -1;
    std::vector<Measured> perEntry;
  };

  // Evaluation.
  void setEntry(size_t idx);
  void useEntry(std::shared_ptr<const EntryData> data);
  RunConfig probeConfig() const;
  void lockstep(int32_t entry, const std::vector<HeadTask*>& tasks,
                const std::function<void(int64_t)>& onDone, const std::function<double(double)>& progressOf);
  std::map<int64_t, Measured> evaluate(const RunConfig& config, const std::vector<int64_t>& heads,
                                       bool quantBreakdown = false);
  void recordProbe(int64_t head, int32_t entry, const Probe& p, const Measured& m, bool pass);
  std::vector<Chosen> verifyAcross(const std::vector<std::vector<Probe>>& candidates, bool acceptLast,
                                   ProgressSpan span);
  // Exact fallback (tuner_fallback.cpp): every head's dense L1 in the tuned numerics, and which heads are
  // tuned in exact numerics because of it.
  void scanQuantization();
  std::map<int64_t, Measured> scanCurrent(const std::vector<int64_t>& heads);
  void chooseExactHeads(const std::vector<uint8_t>& ownHit, bool entryHit, bool layerHit);
  void recordExact(TunedHead& th) const;
  // Progress and results.
  void report(double groupFraction);
  void publish(int64_t h);
  // One entry: every head's SingleEntrySearch in lockstep.
  void runSingle();
  // Entries tuned together, in stages.
  void runTogether();
  void sweepEntries(std::vector<TogetherHead>& heads);
  void applyBinRule(TogetherHead& th) const;
  void verifyCandidates(std::vector<TogetherHead>& heads);
  void searchLambda(std::vector<TogetherHead>& heads);
  void planFinals(TogetherHead& th) const;
  void verifyFinals(std::vector<TogetherHead>& heads);
  void recordFinal(int64_t h, TogetherHead& th, const Chosen& c);

  Engine& engine_;
  const TuneOptions& o_;
  const TuneCallbacks& cb_;
  TuneResult& result_;
  const TuneGroupInput& input_;
  TunedGroup& group_;
  ProgressBase progress_;
  int64_t unitsDoneHere_ = 0;
  int current_ = -1;
  int64_t headsQ_ = 0;
  std::vector<int64_t> heads_;
  std::vector<TunedHead> work_;
  ProbePhase phase_ = ProbePhase::Select;
  std::vector<TunedOn> inputs_;  // per entry, once loaded (its digest)
  // Per head: tuned in exact numerics (ExactFallback), why, and its dense L1 (and its INT8 Q·Kᵀ part) in
  // the tuned numerics, max over the group's entries (NaN when not scanned).
  std::vector<uint8_t> exact_;
  std::vector<TuneDecision::ExactCause> exactCause_;
  std::vector<double> quantL1_, quantQkL1_;
};

}  // namespace sparge::core::tuning
