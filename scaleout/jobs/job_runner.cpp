// The runner the commands' jobs share (job_runner.h).
#include "job_runner.h"

#include <cstdio>

#include "job_support.h"

namespace sparge::scaleout {

JobRunner::JobRunner(Transport& transport, JobEvents events)
    : transport_(transport), events_(std::move(events)), job_(transport, handlers()) {}

// Called while job_ is being built: only the lambdas may use it.
JobHandlers JobRunner::handlers() {
  JobHandlers h;
  h.hello = [this](const RankInfo& r) {
    if (events_.hello) events_.hello(r);
  };
  h.piece = [this](int, int piece, const std::string& payload) {
    if (!collector_) return;  // this rank failed before planning; the job is being stopped
    collector_->add(piece, payload);
    handOver();
  };
  h.final = [this](int rank, const std::string& payload) {
    if (events_.final) events_.final(rank, payload);
  };
  h.progress = [this](const JobProgress& p) {
    if (events_.progress) events_.progress(p);
  };
  h.failure = [this](const RankFailure& f) {
    if (events_.clear) events_.clear();
    std::fprintf(stderr, "sparge: error: %s\n", describeFailure(f, job_.size()).c_str());
  };
  return h;
}

void JobRunner::plan(const Plan& plan, size_t unitCount, const std::function<int64_t(const Piece&)>& workOf) {
  schedule_ = scheduleOf(plan);
  int64_t work = 0;
  for (const Piece& p : schedule_.pieces) work += workOf ? workOf(p) : 1;
  feed_ = startFeed(job_, schedule_, work);
  collector_ = std::make_unique<UnitCollector>(schedule_.pieces, unitCount);
}

const Piece* JobRunner::firstPiece() const {
  const std::vector<int>& mine = schedule_.initial[size_t(job_.rank())];
  return mine.empty() ? nullptr : &schedule_.pieces[size_t(mine.front())];
}

void JobRunner::work(const std::function<bool(int piece)>& runPiece,
                     const std::function<void(const std::function<void()>&)>& messaging) {
  for (;;) {
    int piece = kNoPiece;
    const auto ask = [&] {
      if (!job_.service()) piece = feed_->next();
    };
    if (messaging)
      messaging(ask);
    else
      ask();
    if (piece == kNoPiece || !runPiece(piece)) break;
  }
}

void JobRunner::handOver() {
  bool any = false;
  collector_->drain([&](size_t unit, std::vector<std::string>& payloads) {
    any = true;
    if (events_.unitDone) events_.unitDone(unit, payloads);
  });
  if (any && events_.unitsHandedOver) events_.unitsHandedOver();
}

}  // namespace sparge::scaleout
