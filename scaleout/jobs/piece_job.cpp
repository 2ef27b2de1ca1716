// The unit job: schedule (identical on every rank), run the pieces this rank gets, gather on rank 0 in unit
// order.
#include "piece_job.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "job_support.h"
#include "sparge/scaleout/collector.h"
#include "sparge/scaleout/job.h"

namespace sparge::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Rank 0's one line for the whole job on stderr (redrawn on a terminal, a line every few seconds
// otherwise); only for jobs of several ranks, so that one process prints what it always did.
class JobProgressLine {
 public:
  JobProgressLine(std::string verb, size_t units)
      : verb_(std::move(verb)), units_(units), tty_(isatty(2) != 0) {}

  void update(const dist::JobProgress& p, size_t unitsDone) {
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
  PieceJobRunner(dist::Transport& t, const PieceJobSpec& spec, const PieceJobHooks& hooks)
      : spec_(spec),
        hooks_(hooks),
        job_(t, handlers(t.size())),
        finals_(size_t(t.size())),
        line_(spec.verb, spec.units.size()) {}

  int run() {
    std::string last;
    try {
      schedule();
      const std::vector<int>& mine = schedule_.initial[size_t(job_.rank())];
      if (hooks_.first && !mine.empty()) {
        const dist::Piece& p = schedule_.pieces[size_t(mine.front())];
        hooks_.first(size_t(p.unit), p.heads, p.heads == spec_.units[size_t(p.unit)].heads);
      }
      job_.hello(hooks_.start());
      work();
      if (hooks_.final) last = hooks_.final();
    } catch (const std::exception& e) {
      job_.fail(current_, e.what());
    }
    const dist::JobOutcome outcome = job_.finish(std::move(last));
    if (!job_.root()) return outcome.failures.empty() ? 0 : 1;
    line_.clear();
    if (!outcome.failures.empty()) return 1;
    if (hooks_.finals) hooks_.finals(finals_);
    return 0;
  }

 private:
  // Called while job_ is being built: only the lambdas may use it.
  dist::JobHandlers handlers(int ranks) {
    dist::JobHandlers h;
    h.piece = [this](int, int piece, const std::string& payload) { onPiece(piece, payload); };
    h.final = [this](int rank, const std::string& payload) { finals_[size_t(rank)] = payload; };
    h.failure = [this](const dist::RankFailure& f) {
      line_.clear();
      std::fprintf(stderr, "sparge: error: %s\n", describeFailure(f, job_.size()).c_str());
    };
    if (ranks > 1)
      h.progress = [this](const dist::JobProgress& p) {
        if (collector_) line_.update(p, collector_->handedOver());
      };
    return h;
  }

  // The plan's pieces, fixed per rank, or with several ranks handed out largest first as ranks become free
  // (as tune's).
  void schedule() {
    dist::PlanOptions po;
    po.splitHeads = spec_.splitHeads;
    schedule_ = scheduleOf(dist::planWork(spec_.units, job_.size(), po));
    feed_ = startFeed(job_, schedule_, int64_t(schedule_.pieces.size()));
    collector_ = std::make_unique<dist::UnitCollector>(schedule_.pieces, spec_.units.size());
  }

  void work() {
    const auto t0 = Clock::now();
    double done = 0;
    int64_t count = 0;
    for (;;) {
      if (job_.service()) break;
      const int pi = feed_->next();
      if (pi == dist::kNoPiece) break;
      const dist::Piece& piece = schedule_.pieces[size_t(pi)];
      const dist::WorkUnit& unit = spec_.units[size_t(piece.unit)];
      current_ = spec_.names[size_t(piece.unit)];
      job_.submit(pi, hooks_.run(size_t(piece.unit), piece.heads, piece.heads == unit.heads));
      done += piece.cost;
      dist::RankProgress p;
      p.costDone = done;
      p.unitsDone = ++count;
      p.current = current_;
      p.elapsedSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
      job_.progress(p, true);
    }
    current_.clear();
  }

  void onPiece(int piece, const std::string& payload) {
    if (!collector_) return;  // this rank failed before planning; the job is being stopped
    collector_->add(piece, payload);
    collector_->drain([&](size_t unit, std::vector<std::string>& payloads) {
      line_.clear();
      if (hooks_.unitDone) hooks_.unitDone(unit, payloads);
    });
  }

  const PieceJobSpec& spec_;
  const PieceJobHooks& hooks_;
  dist::Job job_;
  dist::Schedule schedule_;
  std::unique_ptr<dist::PieceFeed> feed_;  // this rank's pieces
  std::unique_ptr<dist::UnitCollector> collector_;
  std::vector<std::string> finals_;
  std::string current_;
  JobProgressLine line_;
};

}  // namespace

int runPieceJob(dist::Transport& transport, const PieceJobSpec& spec, const PieceJobHooks& hooks) {
  PieceJobRunner runner(transport, spec, hooks);
  return runner.run();
}

}  // namespace sparge::cli
