// What the commands that run over several processes (tune, run, bench) share: the transport main
// opened, placing a rank's engine on its GPU or cores, and the lines rank 0 prints about ranks.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sparge/core/engine.h"
#include "sparge/scaleout/job.h"
#include "sparge/scaleout/partition.h"
#include "sparge/scaleout/placement.h"
#include "sparge/scaleout/transport.h"
#include "sparge/kernels/engine_factory.h"

namespace sparge::scaleout {

// The processes of this command: one, or the ranks of an MPI job. Set by main before parsing.
Transport& jobTransport();
void setJobTransport(Transport* transport);

struct RankEngine {
  engines::EngineSelection selection;
  RankInfo info;  // engine name and device, for the rank summary
  std::string note;     // placement remark (ranks sharing a GPU), empty when none
};

// Places this rank: CUDA_VISIBLE_DEVICES = the GPU of its local rank, CPU threads = its share of the cores
// unless `threads` > 0. It sets environment variables: call it before the command starts other threads.
Placement placeThisRank(Transport& transport, int threads);

// Who runs which of `plan`'s pieces: a queue that hands them out largest first as ranks become free, or
// every rank's pieces fixed up front: with one rank (nothing to balance), and with SPARGE_STATIC_PLAN=1,
// which keeps the fixed plan for comparing the two.
Schedule scheduleOf(const Plan& plan);

// Tells `job` its schedule (the pieces' summed cost and `units` work units scale its progress) and returns
// this rank's pieces of it; on rank 0 the job also starts handing out the queue's shared pieces.
std::unique_ptr<PieceFeed> startFeed(Job& job, const Schedule& schedule, int64_t units);

// Creates the engine of a placed rank (on a GPU: CUDA starts here, which takes a while). One process keeps
// today's behaviour exactly.
RankEngine makeRankEngine(const Placement& placement, core::EngineChoice choice);

// When this process started (static initialisation, before main), for the start-up time a rank reports.
std::chrono::steady_clock::time_point processStart();

// "rank 2 (node3) failed on entry l05: <problem>"; with one process just "<where>: <problem>".
std::string describeFailure(const RankFailure& failure, int ranks);

// "4 ranks on 1 host (node1: 4), engine cuda: NVIDIA H100 80GB HBM3 on GPU 0-3".
std::string describeRanks(const std::vector<RankInfo>& ranks, const std::string& transportName);

// The engine name for outputs: the one name every rank shares, else the distinct names joined by " + ".
std::string commonEngineName(const std::vector<RankInfo>& ranks);

}  // namespace sparge::scaleout
