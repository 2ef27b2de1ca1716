// The job protocol: hello, progress, piece, ask, failed and done go to rank 0; grant, stop and end come
// from it.
#include "sparge/scaleout/job.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "sparge/scaleout/wire.h"

namespace sparge::scaleout {
namespace {

enum Tag : int { kHello = 1, kProgress, kPiece, kFailed, kDone, kStop, kEnd, kAsk, kGrant };

using Clock = std::chrono::steady_clock;

double secondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string source(int rank) {
  return "message from rank " + std::to_string(rank);
}

// Polling interval while a rank has nothing else to do: short at first, then relaxed.
void idle(int& rounds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(rounds < 100 ? 1 : 10));
  ++rounds;
}

}  // namespace

template <>
struct WireFields<RankInfo> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.rank, v.host, v.engine, v.device, v.schedule);
  }
};

template <>
struct WireFields<RankProgress> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.costDone, v.unitsDone, v.probes, v.current, v.elapsedSeconds);
  }
};

template <>
struct WireFields<RankFailure> {
  template <class S, class F>
  static void visit(S& v, F&& f) {
    f(v.rank, v.host, v.where, v.problem);
  }
};

Job::Job(Transport& transport, JobHandlers handlers, std::chrono::seconds stopTimeout)
    : transport_(transport), handlers_(std::move(handlers)), stopTimeout_(stopTimeout), start_(Clock::now()) {
  progress_.resize(size_t(size()));
  finished_.assign(size_t(size()), false);
  rejected_.assign(size_t(size()), false);
  hosts_.resize(size_t(size()));
  for (int r = 0; r < size(); ++r) hosts_[size_t(r)].rank = r;
}

void Job::setSchedule(std::string description, double cost, int64_t units) {
  schedule_ = std::move(description);
  totalCost_ = cost;
  totalUnits_ = units;
}

void Job::hello(RankInfo info) {
  info.rank = rank();
  info.host = transport_.host();
  info.schedule = schedule_;
  if (!root()) {
    transport_.send(0, kHello, encode(info));
    return;
  }
  hosts_[0] = info;
  if (handlers_.hello) handlers_.hello(info);
}

void Job::progress(const RankProgress& p, bool now) {
  if (root()) {
    progress_[0] = p;
    publishProgress();
    return;
  }
  const auto t = Clock::now();
  if (!now && t - lastSent_ < std::chrono::milliseconds(500)) return;
  lastSent_ = t;
  transport_.send(0, kProgress, encode(p));
}

void Job::submit(int piece, std::string payload) {
  if (!root()) {
    WireWriter w;
    w.put(int32_t(piece));
    w.put(payload);
    transport_.send(0, kPiece, w.take());
    return;
  }
  if (handlers_.piece) handlers_.piece(0, piece, payload);
}

void Job::serve(std::vector<int> pieces) {
  served_ = std::move(pieces);
  nextServed_ = 0;
}

// Rank 0's answer to a request: the next piece of the queue; none once a failure or an interruption
// stops the job, since no rank may start new work then.
int Job::grant() {
  if (stop_.load() || nextServed_ >= served_.size()) return kNoPiece;
  return served_[nextServed_++];
}

void Job::askForPiece() {
  if (root())
    grants_.push_back(grant());
  else
    transport_.send(0, kAsk, {});
}

std::optional<int> Job::takeGrant() {
  if (grants_.empty()) return std::nullopt;
  const int piece = grants_.front();
  grants_.pop_front();
  return piece;
}

void Job::fail(const std::string& where, const std::string& problem) {
  failed_ = true;
  stop_.store(true);
  const RankFailure f{rank(), transport_.host(), where, problem};
  if (!root()) {
    transport_.send(0, kFailed, encode(f));
    return;
  }
  finished_[0] = true;
  recordFailure(f);
}

void Job::recordFailure(const RankFailure& f) {
  outcome_.failures.push_back(f);
  if (handlers_.failure) handlers_.failure(f);
  requestStop();
}

void Job::requestStop() {
  if (!root()) return;
  if (!outcome_.stopped) {
    outcome_.stopped = true;
    stopSince_ = Clock::now();
    for (int r = 1; r < size(); ++r)
      if (!finished_[size_t(r)]) transport_.send(r, kStop, {});
  }
  stop_.store(true);
}

bool Job::service() {
  while (std::optional<Message> m = transport_.poll()) handle(*m);
  return stop_.load();
}

void Job::handle(const Message& m) {
  if (!root()) {
    if (m.tag == kStop) stop_.store(true);
    if (m.tag == kGrant) grants_.push_back(decode<int32_t>(m.payload, source(m.source)));
    return;
  }
  const size_t r = size_t(m.source);
  switch (m.tag) {
    case kHello:
      hosts_[r] = decode<RankInfo>(m.payload, source(m.source));
      checkSchedule(m.source);
      if (handlers_.hello) handlers_.hello(hosts_[r]);
      break;
    case kProgress:
      progress_[r] = decode<RankProgress>(m.payload, source(m.source));
      publishProgress();
      break;
    case kPiece: {
      WireReader in(m.payload, source(m.source));
      const int piece = in.read<int32_t>();
      const std::string payload = in.read<std::string>();
      in.expectEnd();
      if (handlers_.piece && !rejected_[r]) handlers_.piece(m.source, piece, payload);
      break;
    }
    case kAsk:
      transport_.send(m.source, kGrant, encode(int32_t(grant())));
      break;
    case kFailed: {
      finished_[r] = true;
      recordFailure(decode<RankFailure>(m.payload, source(m.source)));
      break;
    }
    case kDone:
      finished_[r] = true;
      if (handlers_.final) handlers_.final(m.source, m.payload);
      publishProgress();
      break;
    default:
      break;
  }
}

void Job::checkSchedule(int rank) {
  const RankInfo& info = hosts_[size_t(rank)];
  if (schedule_.empty() || info.schedule == schedule_) return;
  rejected_[size_t(rank)] = true;
  recordFailure(RankFailure{rank, info.host, "",
                            "its pieces are " + info.schedule + ", rank 0's " + schedule_ +
                                " — every rank must run the same command on the same capture, with the same "
                                "SPARGE_STATIC_PLAN"});
}

void Job::publishProgress() {
  if (!handlers_.progress) return;
  JobProgress j;
  j.ranks = size();
  j.unitsTotal = totalUnits_;
  double done = 0, rate = 0;  // cost done, and per second by the ranks still working
  for (size_t r = 0; r < progress_.size(); ++r) {
    const RankProgress& p = progress_[r];
    j.ranksFinished += finished_[r] ? 1 : 0;
    j.unitsDone += p.unitsDone;
    j.probes += p.probes;
    done += p.costDone;
    if (!finished_[r] && p.elapsedSeconds > 0) rate += p.costDone / p.elapsedSeconds;
  }
  j.fraction = totalCost_ > 0 ? std::clamp(done / totalCost_, 0.0, 1.0) : double(j.ranksFinished) / size();
  if (j.fraction >= 1.0)
    j.etaSeconds = 0;
  else if (j.fraction >= 0.01 && rate > 0)
    j.etaSeconds = (totalCost_ - done) / rate;
  j.elapsedSeconds = secondsBetween(start_, Clock::now());
  j.current = progress_[0].current;
  if (size() > 1) {
    // snprintf rather than string concatenation: the latter trips a GCC 12 -Wrestrict false positive.
    char busy[64];
    std::snprintf(busy, sizeof busy, "%s[%d/%d ranks busy]", j.current.empty() ? "" : " ",
                  size() - j.ranksFinished, size());
    j.current += busy;
  }
  handlers_.progress(j);
}

bool Job::allFinished() const {
  return std::all_of(finished_.begin(), finished_.end(), [](bool b) { return b; });
}

JobOutcome Job::finish(std::string finalPayload) {
  int rounds = 0;
  if (!root()) {
    if (!failed_) transport_.send(0, kDone, std::move(finalPayload));
    for (;;) {
      std::optional<Message> m = transport_.poll();
      if (m && m->tag == kEnd) break;
      if (!m) idle(rounds);
    }
    while (!transport_.sendsDone()) idle(rounds);
    return outcome_;
  }
  if (!failed_) {
    finished_[0] = true;
    if (handlers_.final) handlers_.final(0, finalPayload);
  }
  while (!allFinished()) {
    if (service()) {
      if (Clock::now() - stopSince_ > stopTimeout_) {
        for (int r = 0; r < size(); ++r)
          if (!finished_[size_t(r)])
            std::fprintf(stderr, "sparge: rank %d (%s) did not stop within %lld s: ending the job\n", r,
                         hosts_[size_t(r)].host.c_str(), (long long)stopTimeout_.count());
        transport_.abort(1);
      }
    }
    idle(rounds);
  }
  publishProgress();
  for (int r = 1; r < size(); ++r) transport_.send(r, kEnd, {});
  while (!transport_.sendsDone()) idle(rounds);
  return outcome_;
}

PieceFeed::PieceFeed(Job& job, std::vector<int> initial, bool ask)
    : job_(job), held_(initial.begin(), initial.end()), more_(ask) {}

int PieceFeed::next() {
  int rounds = 0;
  for (;;) {
    collect();
    if (job_.stopFlag().load()) return kNoPiece;
    if (!held_.empty()) break;
    if (!more_) return kNoPiece;
    if (!asking_) {
      ask();
      continue;  // rank 0 answers itself at once
    }
    job_.service();
    idle(rounds);
  }
  const int piece = held_.front();
  held_.pop_front();
  if (held_.empty() && more_ && !asking_) ask();
  ++started_;
  return piece;
}

std::optional<int> PieceFeed::ahead() {
  collect();
  if (!held_.empty()) return held_.front();
  if (asking_) return std::nullopt;
  return kNoPiece;
}

void PieceFeed::collect() {
  while (std::optional<int> g = job_.takeGrant()) {
    asking_ = false;
    if (*g == kNoPiece)
      more_ = false;
    else
      held_.push_back(*g);
  }
}

void PieceFeed::ask() {
  asking_ = true;
  job_.askForPiece();
}

}  // namespace sparge::scaleout
