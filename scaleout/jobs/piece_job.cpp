// The unit job: schedule (identical on every rank), run the pieces this rank gets, gather on rank 0 in unit
// order.
#include "piece_job.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "job_runner.h"

namespace sparge::scaleout {
namespace {

using Clock = std::chrono::steady_clock;

// Rank 0's one line for the whole job on stderr (redrawn on a terminal, a line every few seconds
// otherwise); only for jobs of several ranks, so that one process prints what it always did.
class JobProgressLine {
 public:
  JobProgressLine(std::string verb, size_t units)
      : verb_(std::move(verb)), units_(units), tty_(isatty(2) != 0) {}

  void update(const JobProgress& p, size_t unitsDone) {
    const auto now = Clock::now();
    const bool last = unitsDone == units_;
    if (last ? shownLast_ : now - last_ < std::chrono::milliseconds(tty_ ? 200 : 5000)) return;
    shownLast_ = last;
    last_ = now;
    char eta[32] = "?";
    if (p.etaSeconds >= 0) std::snprintf(eta, sizeof eta, "%.0fs", p.etaSeconds);
    std::fprintf(stderr, "%s%s: %zu/%zu done  %3.0f%%  %d/%d ranks busy  elapsed %.0fs  ETA %s%s",
                 tty_ ? "\r\033[K" : "", verb_.c_str(), unitsDone, units_, p.fraction * 100.0,
                 p.ranks - p.ranksFinished, p.ranks, p.elapsedSeconds, eta, tty_ ? "" : "\n");
    drawn_ = tty_;
  }
  void clear() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
    drawn_ = false;
  }

 private:
  std::string verb_;
  size_t units_;
  bool tty_;
  bool drawn_ = false;
  bool shownLast_ = false;
  Clock::time_point last_{};
};

class PieceJobRunner {
 public:
  PieceJobRunner(Transport& t, const PieceJobSpec& spec, const PieceJobHooks& hooks)
      : spec_(spec),
        hooks_(hooks),
        finals_(size_t(t.size())),
        line_(spec.verb, spec.units.size()),
        runner_(t, events(t.size())) {}

  int run() {
    Job& job = runner_.job();
    std::string last;
    try {
      PlanOptions po;
      po.splitHeads = spec_.splitHeads;
      runner_.plan(planWork(spec_.units, job.size(), po), spec_.units.size());
      if (const Piece* p = runner_.firstPiece(); hooks_.first && p)
        hooks_.first(size_t(p->unit), p->heads, p->heads == spec_.units[size_t(p->unit)].heads);
      job.hello(hooks_.start());
      work();
      if (hooks_.final) last = hooks_.final();
    } catch (const std::exception& e) {
      job.fail(current_, e.what());
    }
    const JobOutcome outcome = job.finish(std::move(last));
    if (!job.root()) return outcome.failures.empty() ? 0 : 1;
    line_.clear();
    if (!outcome.failures.empty()) return 1;
    if (hooks_.finals) hooks_.finals(finals_);
    return 0;
  }

 private:
  // Called while runner_ is being built: only the lambdas may use it.
  JobEvents events(int ranks) {
    JobEvents e;
    e.final = [this](int rank, const std::string& payload) { finals_[size_t(rank)] = payload; };
    e.clear = [this] { line_.clear(); };
    if (ranks > 1)
      e.progress = [this](const JobProgress& p) {
        if (runner_.scheduled()) line_.update(p, runner_.collector().handedOver());
      };
    e.unitDone = [this](size_t unit, std::vector<std::string>& payloads) {
      line_.clear();
      if (hooks_.unitDone) hooks_.unitDone(unit, payloads);
    };
    return e;
  }

  void work() {
    const auto t0 = Clock::now();
    double done = 0;
    int64_t count = 0;
    runner_.work([&](int pi) {
      const Piece& piece = runner_.schedule().pieces[size_t(pi)];
      const WorkUnit& unit = spec_.units[size_t(piece.unit)];
      current_ = spec_.names[size_t(piece.unit)];
      runner_.job().submit(pi, hooks_.run(size_t(piece.unit), piece.heads, piece.heads == unit.heads));
      done += piece.cost;
      RankProgress p;
      p.costDone = done;
      p.unitsDone = ++count;
      p.current = current_;
      p.elapsedSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
      runner_.job().progress(p, true);
      return true;
    });
    current_.clear();
  }

  const PieceJobSpec& spec_;
  const PieceJobHooks& hooks_;
  std::vector<std::string> finals_;
  std::string current_;
  JobProgressLine line_;
  JobRunner runner_;  // last: its job's handlers use the members above
};

}  // namespace

int runPieceJob(Transport& transport, const PieceJobSpec& spec, const PieceJobHooks& hooks) {
  PieceJobRunner runner(transport, spec, hooks);
  return runner.run();
}

}  // namespace sparge::scaleout
