// One job over all ranks: every rank works through its pieces and sends each result to rank 0, which
// hands them to the command (printing, writing outputs), hands out the pieces of a queue as ranks ask for
// them, keeps one progress figure for the whole job, and stops every rank when one fails or the user
// interrupts. Nothing blocks: ranks poll between engine runs, and a rank that does not stop in time ends
// the whole job instead of leaving it hanging.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sparge/scaleout/transport.h"

namespace sparge::scaleout {

// What a rank announces when it starts.
struct RankInfo {
  int rank = 0;
  std::string host;
  std::string engine;    // Engine::name()
  std::string device;    // "GPU 2", "4 threads"
  std::string schedule;  // how the job's pieces are handed out (Job::setSchedule)
};

// A rank's progress: what it has done so far (which pieces it gets is not known up front).
struct RankProgress {
  double costDone = 0;  // estimated cost of its finished work, the done part of its current piece included
  int64_t unitsDone = 0;
  int64_t probes = 0;         // engine runs so far
  std::string current;        // what it works on now
  double elapsedSeconds = 0;  // since it started working
};

// The whole job, as rank 0 sees it.
struct JobProgress {
  int ranks = 1;
  int ranksFinished = 0;
  int64_t unitsDone = 0, unitsTotal = 0;
  double fraction = 0;        // estimated cost done over the job's
  double elapsedSeconds = 0;  // since rank 0 started
  double etaSeconds = -1;     // cost left over the busy ranks' summed rates; -1 while unknown
  int64_t probes = 0;
  std::string current;
};

// What rank 0 answers to a request for a piece when none is left.
inline constexpr int kNoPiece = -1;

struct RankFailure {
  int rank = 0;
  std::string host;
  std::string where;    // the entry or group it was working on (empty: before any)
  std::string problem;  // the error message
};

// Called on rank 0, on the thread that drives the job, from service() and finish().
struct JobHandlers {
  std::function<void(const RankInfo&)> hello;
  std::function<void(int rank, int piece, const std::string& payload)> piece;
  std::function<void(int rank, const std::string& payload)> final;  // the payload given to finish()
  std::function<void(const JobProgress&)> progress;
  std::function<void(const RankFailure&)> failure;
};

struct JobOutcome {
  std::vector<RankFailure> failures;  // rank 0 only; ordered by arrival
  bool stopped = false;               // a stop was requested (failure or interruption)
};

class Job {
 public:
  // `stopTimeout`: how long rank 0 waits for the ranks to stop once a stop was requested before it
  // ends the job. Create the job before anything that can fail, so that every failure is reported.
  explicit Job(Transport& transport, JobHandlers handlers = {},
               std::chrono::seconds stopTimeout = std::chrono::seconds(120));

  // How the job's pieces are handed out ("a queue of 14 pieces"), and the whole job's estimated cost and
  // work units (e.g. entry × head pairs), the scale of its progress. Every rank must have the same schedule:
  // rank 0 stops the job when a rank announces another one (started with another SPARGE_STATIC_PLAN, say),
  // and drops that rank's pieces, which would belong to another job.
  void setSchedule(std::string description, double cost, int64_t units);

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  bool root() const { return transport_.rank() == 0; }
  Transport& transport() { return transport_; }

  void hello(RankInfo info);
  // Sent at most every 0.5 s, unless `now` (after a piece, so that rank 0's sum is exact once ranks finish).
  void progress(const RankProgress& p, bool now = false);
  void submit(int piece, std::string payload);
  // Rank 0: the pieces of a queue, handed out in this order, one per request, until none is left or the
  // job is being stopped.
  void serve(std::vector<int> pieces);
  // Asks rank 0 for a piece of the queue; the answer comes through takeGrant (on rank 0, at once).
  void askForPiece();
  // The oldest answer not taken yet: a piece, or kNoPiece; nothing while none has arrived (see service()).
  std::optional<int> takeGrant();
  // This rank failed on `where`: rank 0 is told and stops the job. The rank then calls finish().
  void fail(const std::string& where, const std::string& problem);
  // Rank 0: ask every rank to stop after its current engine run (interruption). Others: no-op.
  void requestStop();
  // Handles what has arrived (rank 0: everything the ranks send, answering requests for pieces; other
  // ranks: stop requests and answers); true once the job is being stopped. Cheap enough to call after
  // every engine run.
  bool service();
  // Set while the job is being stopped: pass it as the engine's / tuner's cancel flag.
  const std::atomic<bool>& stopFlag() const { return stop_; }

  // Ends this rank's part. Other ranks send `finalPayload` and wait until rank 0 releases them; rank 0
  // waits until every rank has finished or failed (calling the handlers meanwhile), ends the job with
  // Transport::abort when a stop is not obeyed within the timeout, and releases the ranks.
  JobOutcome finish(std::string finalPayload = {});

 private:
  void handle(const Message& m);
  void publishProgress();
  void checkSchedule(int rank);
  int grant();
  void recordFailure(const RankFailure& f);
  bool allFinished() const;

  Transport& transport_;
  std::string schedule_;
  double totalCost_ = 0;
  int64_t totalUnits_ = 0;
  std::vector<bool> rejected_;  // rank 0: ranks whose schedule differs from its own
  std::vector<int> served_;     // rank 0: the queue
  size_t nextServed_ = 0;
  std::deque<int> grants_;  // answers to this rank's requests, oldest first
  JobHandlers handlers_;
  std::chrono::seconds stopTimeout_;
  std::chrono::steady_clock::time_point start_, lastSent_, stopSince_;
  std::atomic<bool> stop_{false};
  bool failed_ = false;
  std::vector<RankProgress> progress_;  // rank 0: latest per rank
  std::vector<bool> finished_;          // rank 0: done or failed
  std::vector<RankInfo> hosts_;         // rank 0: hello per rank
  JobOutcome outcome_;
};

// A rank's pieces, one at a time: those it starts with, then, where rank 0 hands out more, one asked for
// whenever it starts a piece, so that the answer arrives while it works (rank 0 answers between its own
// engine runs) and the piece after the current one is known in time to load its data.
class PieceFeed {
 public:
  // `initial`: the pieces this rank starts with; `ask`: whether rank 0 hands out more.
  PieceFeed(Job& job, std::vector<int> initial, bool ask);

  // The piece to start now, waiting (and serving the job) for rank 0's answer when none is at hand;
  // kNoPiece once nothing is left for this rank or the job is being stopped.
  int next();
  // The piece after the current one: kNoPiece when there is none, nothing while the answer is on its way.
  std::optional<int> ahead();
  int started() const { return started_; }

 private:
  void collect();
  void ask();

  Job& job_;
  std::deque<int> held_;  // granted, not started
  bool more_;             // rank 0 may still have pieces for this rank
  bool asking_ = false;   // a request is on its way
  int started_ = 0;
};

}  // namespace sparge::scaleout
