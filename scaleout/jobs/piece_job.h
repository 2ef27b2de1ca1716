// A command as a job of independent units (entries for `run`, sweep points for `bench`) over one or many
// processes: the units, and where they are fewer than the ranks their heads, are split by estimated cost
// and handed out largest first as ranks become free (SPARGE_STATIC_PLAN=1: fixed per rank up front); each
// rank runs the pieces it gets; rank 0 receives whole units in order, prints one progress line for the whole
// job and reports a failing rank by rank, host and unit.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sparge/scaleout/job.h"
#include "sparge/scaleout/partition.h"
#include "sparge/scaleout/transport.h"

namespace sparge::scaleout {

struct PieceJobSpec {
  std::vector<WorkUnit> units;
  std::vector<std::string> names;  // per unit, for progress and errors ("entry l03", "N=16384 D=128")
  bool splitHeads = true;          // false: whole units only
  std::string verb = "run";        // progress line prefix
};

struct PieceJobHooks {
  // Every rank that has pieces, before start(): the piece it runs first, so that start() can begin loading
  // its data while it creates the engine. May be empty.
  std::function<void(size_t unit, const std::vector<int64_t>& heads, bool wholeUnit)> first;
  // Every rank, before its first piece: set up (place the rank, create its engine) and describe it.
  std::function<RankInfo()> start;
  // Every rank: runs `heads` of `unit` (all of the unit's heads when it is not split) and returns what
  // rank 0 needs of the result.
  std::function<std::string(size_t unit, const std::vector<int64_t>& heads, bool wholeUnit)> run;
  // Every rank, after its pieces: a last payload (e.g. its raw timings); may be empty.
  std::function<std::string()> final;
  // Rank 0: each unit once all its pieces arrived, in unit order (payloads in head order).
  std::function<void(size_t unit, std::vector<std::string>& payloads)> unitDone;
  // Rank 0, at the end: the final payload of every rank (index = rank; empty for a rank that failed).
  std::function<void(std::vector<std::string>& finals)> finals;
};

// Returns 0, or 1 after a failure (rank 0 has printed which rank, host and unit, and why).
int runPieceJob(Transport& transport, const PieceJobSpec& spec, const PieceJobHooks& hooks);

}  // namespace sparge::scaleout
