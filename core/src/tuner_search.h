// The tuner's per-head searches: each is a small state machine that proposes one probe at a time and is
// fed the probe's measured figures, so that a driver can evaluate every head's next probe in one engine run.
#pragma once

#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "sparge/core/tuner.h"

namespace sparge::core::tuning {

// Figures of one head in one run, summed over the batch items.
struct Measured {
  double stage1 = 0, total = 0, l1 = 0;
  // The same run in exact numerics, and dense in the tuned numerics (NaN when not measured).
  double l1Sparse = std::numeric_limits<double>::quiet_NaN(),
         l1Quant = std::numeric_limits<double>::quiet_NaN();
  // Dense with INT8 Q·Kᵀ and fp32 P·V (only in the quantization scan; NaN otherwise).
  double l1QuantQk = std::numeric_limits<double>::quiet_NaN();
  // Self-similarity of every Q / K block of every batch item (empty when the engine does not report
  // them); used to find θ values that give identical masks.
  std::vector<float> simQ, simK;
  // The share of the dense attention that falls in the computed blocks (MInference's pattern choice).
  double recall = std::numeric_limits<double>::quiet_NaN();
};

// A probe proposed by a search, with the budget it is judged against.
struct Probe {
  HeadParams params;
  ProbePhase phase = ProbePhase::Select;
  double budget = 0;
};

HeadParams probeParams(const TuneOptions& o, double theta, double sel, double lambda);
// What upstream writes for a non-sparse head (θ = 1, τ = 1): every block forced on, no useful skip.
HeadParams denseParams(const TuneOptions& o);
double selOf(const HeadParams& p);

// A part [begin, end) of a progress bar: a stage's own fraction in [0, 1] maps into it.
struct ProgressSpan {
  double begin = 0, end = 1;
  constexpr double at(double f) const { return begin + (end - begin) * f; }
};

// Progress weights: the share of a head's engine runs each stage takes, so that one bar moves evenly.
// The θ sweep dominates (up to 32 θ × ~10 bisection probes, fewer with reuse and the early stop), the λ
// bisection takes ~9 probes (log2(50 / 0.1)), each verification 1 to 4.
inline constexpr ProgressSpan kSingleSweep{0.0, 0.80};  // one entry: θ sweep with τ / top-k bisection
inline constexpr ProgressSpan kSingleLambda{0.80, 0.98};
inline constexpr double kSingleFinal = 0.98;              // one check of the exported values
inline constexpr ProgressSpan kTogetherSweep{0.0, 0.70};  // entries tuned together: every entry swept
inline constexpr ProgressSpan kTogetherVerify{0.70, 0.80};
inline constexpr ProgressSpan kTogetherLambda{0.80, 0.95};
inline constexpr ProgressSpan kTogetherFinal{0.95, 1.0};

class HeadTask {
 public:
  virtual ~HeadTask() = default;
  // The next probe, or false when the task is finished.
  virtual bool next(Probe& probe) = 0;
  virtual void feed(const Probe& probe, const Measured& m, bool pass) = 0;
  virtual double fraction() const = 0;  // progress in [0, 1]
};

// Bisection on [lo, hi] for the smallest value that passes: a pass moves the upper bound down, a failure
// the lower bound up, until the interval is narrower than the tolerance. Used for τ / top-k (sparser as
// the value falls) and for λ (more PV skipping as it falls).
class Bisection {
 public:
  Bisection(double lo, double hi, double tolerance);
  bool open() const { return hi_ - lo_ >= tolerance_; }
  double mid() const { return 0.5 * (lo_ + hi_); }
  void feed(bool pass);
  double fraction() const;  // interval halvings done / halvings needed

 private:
  double lo_, hi_, span_, tolerance_;
};

// The best passing point of `points`: the largest stage-1 sparsity, then the smallest L1, then the first.
const ThetaPoint* bestPoint(const std::vector<ThetaPoint>& points);

// The first stage of a head's search: the points it evaluated with the PV skip off, and the best of them.
class SweepTask : public HeadTask {
 public:
  virtual const std::vector<ThetaPoint>& points() const = 0;
  // Best passing point: the largest stage-1 sparsity, then the smallest L1 (then the smallest θ).
  virtual const ThetaPoint* best() const = 0;
  virtual int reusedCount() const { return 0; }
  // The probe parameters of a point, PV skip off.
  virtual HeadParams paramsAt(const ThetaPoint& p) const = 0;
};

// θ sweep (ascending) with a τ / top-k bisection per θ, PV skip off. θ values whose self-similarity flags
// equal the previous θ's give identical masks for every τ, so their result is reused instead of searched
// again (upstream searches them again: every θ < 0 is the same, for example).
class ThetaSweep : public SweepTask {
 public:
  ThetaSweep(const TuneOptions& o, int32_t entry, std::vector<double> grid);
  bool next(Probe& probe) override;
  void feed(const Probe& probe, const Measured& m, bool pass) override;
  double fraction() const override;

  const std::vector<ThetaPoint>& points() const override { return points_; }
  const ThetaPoint* best() const override;
  int reusedCount() const override;
  HeadParams paramsAt(const ThetaPoint& p) const override;

 private:
  bool startTheta();
  void finishTheta();
  std::vector<uint8_t> signature(double theta) const;
  bool allForced(const std::vector<uint8_t>& sig) const;

  const TuneOptions& o_;
  int32_t entry_;
  std::vector<double> grid_;
  size_t idx_ = 0;
  bool done_ = false;
  std::optional<Bisection> sel_;  // the τ / top-k bisection of the current θ; empty between θ values
  ThetaPoint current_;
  std::vector<ThetaPoint> points_;
  bool haveSims_ = false;
  std::vector<float> simQ_, simK_;
  std::vector<uint8_t> lastSig_;
};

// λ bisection for fixed θ, τ: the smallest passing λ (most PV skipping) that was evaluated.
class LambdaSearch : public HeadTask {
 public:
  LambdaSearch(const TuneOptions& o, HeadParams base, double budget);
  bool next(Probe& probe) override;
  void feed(const Probe& probe, const Measured& m, bool pass) override;
  double fraction() const override { return bisection_.fraction(); }

  bool found() const { return found_; }
  const HeadParams& bestParams() const { return bestParams_; }
  const Measured& bestMeasured() const { return best_; }

 private:
  HeadParams base_;
  double budget_;
  Bisection bisection_;
  bool found_ = false;
  HeadParams bestParams_;
  Measured best_;
};

// Evaluates candidates in order and stops at the first that passes.
class CandidateList : public HeadTask {
 public:
  explicit CandidateList(std::vector<Probe> probes) : probes_(std::move(probes)) {}
  bool next(Probe& probe) override;
  void feed(const Probe& probe, const Measured& m, bool pass) override;
  double fraction() const override;
  const std::vector<std::pair<Measured, bool>>& results() const { return results_; }

 private:
  std::vector<Probe> probes_;
  size_t idx_ = 0;
  bool stopped_ = false;
  std::vector<std::pair<Measured, bool>> results_;
};

// The whole search of one head on one entry: θ sweep (or another method's knob search) → best point →
// is_sparse cut → λ → verification. Writes the exported values, figures and decision into `out` when it
// finishes.
class SingleEntrySearch : public HeadTask {
 public:
  SingleEntrySearch(const TuneOptions& o, std::vector<double> grid, TunedHead& out);
  SingleEntrySearch(const TuneOptions& o, std::unique_ptr<SweepTask> sweep, TunedHead& out);
  bool next(Probe& probe) override;
  void feed(const Probe& probe, const Measured& m, bool pass) override;
  double fraction() const override;

 private:
  enum class Stage { Sweep, Lambda, Final, Done };

  void afterSweep();
  void afterLambda();
  void checkLambda(TuneDecision::LambdaSource source, double lambda, double budget);
  void startFinal(const Probe& probe, bool denseHead);
  void afterFinal();
  void finish(const HeadParams& p, const Measured& m, bool sparse);

  const TuneOptions& o_;
  TunedHead& out_;
  Stage stage_ = Stage::Sweep;
  std::unique_ptr<SweepTask> sweep_;
  std::unique_ptr<LambdaSearch> lambda_;
  std::unique_ptr<CandidateList> final_;
  Probe finalProbe_;
  bool finalDense_ = false;
  HeadParams base_;
  Measured baseMeasured_;
  TuneDecision decision_;
};

std::vector<double> sortedGrid(const std::vector<double>& g);

}  // namespace sparge::core::tuning
