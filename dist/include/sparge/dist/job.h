// One job over all ranks: every rank works through its pieces and sends each result to rank 0, which
// hands them to the command (printing, writing outputs), keeps one progress figure for the whole job,
// and stops every rank when one fails or the user interrupts. Nothing blocks: ranks poll between
// engine runs, and a rank that does not stop in time ends the whole job instead of leaving it hanging.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sparge/dist/transport.h"

namespace sparge::dist {

// What a rank announces when it starts.
struct RankInfo {
  int rank = 0;
  std::string host;
  std::string engine;  // Engine::name()
  std::string device;  // "GPU 2", "4 threads"
};

// A rank's progress through its own share of the job.
struct RankProgress {
  double fraction = 0;  // [0, 1] of the rank's estimated cost
  int64_t unitsDone = 0, unitsTotal = 0;
  int64_t probes = 0;   // engine runs so far
  std::string current;  // what it works on now
  double elapsedSeconds = 0;
};

// The whole job, as rank 0 sees it.
struct JobProgress {
  int ranks = 1;
  int ranksFinished = 0;
  int64_t unitsDone = 0, unitsTotal = 0;
  double fraction = 0;        // cost-weighted over ranks
  double elapsedSeconds = 0;  // since rank 0 started
  double etaSeconds = -1;     // the slowest rank's estimate; -1 while unknown
  int64_t probes = 0;
  std::string current;
};

// A rank's part of the job, known to every rank from the plan.
struct RankShare {
  double cost = 0;    // estimated cost (weight in the job-wide fraction)
  int64_t units = 0;  // work units (e.g. entry × head pairs)
};

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

  // Each rank's part (weights of the job-wide progress), once planned.
  void setShares(std::vector<RankShare> shares);

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  bool root() const { return transport_.rank() == 0; }
  Transport& transport() { return transport_; }

  void hello(RankInfo info);
  void progress(const RankProgress& p);  // sent at most every 0.5 s, and always at fraction 1
  void submit(int piece, std::string payload);
  // This rank failed on `where`: rank 0 is told and stops the job. The rank then calls finish().
  void fail(const std::string& where, const std::string& problem);
  // Rank 0: ask every rank to stop after its current engine run (interruption). Others: no-op.
  void requestStop();
  // Handles what has arrived (rank 0) or checks for a stop request (other ranks); true once the job
  // is being stopped. Cheap enough to call after every engine run.
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
  void recordFailure(const RankFailure& f);
  bool allFinished() const;

  Transport& transport_;
  std::vector<RankShare> shares_;
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

}  // namespace sparge::dist
