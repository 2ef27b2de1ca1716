// The runner every command's job over ranks is built on (tune; run and bench as jobs of units): the job
// protocol, the schedule of pieces (identical on every rank), this rank's feed of pieces, rank 0's collector
// of whole units, the failure line, and the loop that takes pieces until none is left or the job stops.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sparge/scaleout/collector.h"
#include "sparge/scaleout/job.h"
#include "sparge/scaleout/partition.h"
#include "sparge/scaleout/transport.h"

namespace sparge::scaleout {

// Rank 0's reactions to what the ranks send; each may be empty. They run on the thread that drives the job.
struct JobEvents {
  std::function<void(const RankInfo&)> hello;
  std::function<void(int rank, const std::string& payload)> final;  // a rank's last message
  std::function<void(const JobProgress&)> progress;                 // the whole job
  std::function<void()> clear;  // before the runner prints a failure (a progress line to erase)
  // Each unit once all its pieces arrived, in unit order (payloads in head order).
  std::function<void(size_t unit, std::vector<std::string>& payloads)> unitDone;
  std::function<void()> unitsHandedOver;  // after one or more unitDone calls of the same arrival
};

class JobRunner {
 public:
  // Create it before anything that can fail, so that every failure reaches rank 0.
  JobRunner(Transport& transport, JobEvents events);

  Job& job() { return job_; }
  const Job& job() const { return job_; }
  Transport& transport() { return transport_; }
  // Who runs which of `plan`'s pieces (scheduleOf) for a job of `unitCount` units, the job's progress scale
  // (the pieces' summed cost and work units: `workOf` each piece, 1 when empty) and this rank's feed; on
  // rank 0 also the queue's hand-out and the collector.
  void plan(const Plan& plan, size_t unitCount, const std::function<int64_t(const Piece&)>& workOf = {});
  const Schedule& schedule() const { return schedule_; }
  PieceFeed& feed() { return *feed_; }
  bool scheduled() const { return collector_ != nullptr; }  // plan() done
  UnitCollector& collector() { return *collector_; }        // after plan()
  // The piece this rank starts with, if any (known before work(): its data may load meanwhile).
  const Piece* firstPiece() const;

  // Takes pieces until none is left for this rank or the job stops: between pieces the job's messages are
  // served, then the next piece comes from the feed (both inside `messaging`, which the tune job times as
  // coordination); `runPiece` runs one and returns false to stop early.
  void work(const std::function<bool(int piece)>& runPiece,
            const std::function<void(const std::function<void()>&)>& messaging = {});

  // Rank 0: hands whole units to events.unitDone; also called by the caller at the end (units that needed
  // no piece).
  void handOver();

 private:
  JobHandlers handlers();

  Transport& transport_;
  JobEvents events_;
  Job job_;
  Schedule schedule_;
  std::unique_ptr<PieceFeed> feed_;
  std::unique_ptr<UnitCollector> collector_;
};

}  // namespace sparge::scaleout
