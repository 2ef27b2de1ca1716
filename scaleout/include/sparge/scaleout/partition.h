// Splitting a job over ranks: the cost model of an entry; a cost-balanced, deterministic plan that gives
// whole units (tuning groups, entries) to ranks and splits a unit's heads only where whole units cannot be
// balanced (for example fewer entries than ranks); and the schedule of a job, which hands pieces out either
// up front (that plan) or from a queue, as ranks become free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparge/core/types.h"

namespace sparge::scaleout {

// Estimated work of one query head of an entry: B · (query, key) pairs it attends · D, where the pairs
// follow core::visibleKeys (causal and windowed attention do less work). Only ratios matter.
double headCost(const core::EntryInfo& entry);

// A unit of work: a tuning group or an entry, with the query heads still to do (sorted, unique).
struct WorkUnit {
  double costPerHead = 0;  // headCost summed over the unit's entries
  std::vector<int64_t> heads;
};

// Heads of one unit given to one rank.
struct Piece {
  int unit = 0;
  std::vector<int64_t> heads;  // sorted
  double cost = 0;
  int rank = 0;  // in a queue: the rank that starts with it, -1 for a piece handed out later
};

struct Plan {
  int ranks = 1;
  std::vector<Piece> pieces;  // ordered by unit, then first head
  std::vector<double> load;   // estimated cost per rank

  std::vector<int> piecesOf(int rank) const;  // indices into `pieces`, in order
  double makespan() const;                    // the largest load
  double imbalance() const;                   // makespan / mean load (1 = perfect)
};

struct PlanOptions {
  double tolerance = 0.1;  // stop splitting once the makespan is within this fraction of the ideal
  bool splitHeads = true;  // false: whole units only
};

// Deterministic (the same inputs give the same plan on every rank, so ranks plan without talking).
// Whole units are placed largest first on the least loaded rank (ties: lowest rank). While the
// largest load exceeds the mean by more than `tolerance` and by more than one head, the unit with the
// largest pieces is cut into one more contiguous head range and the placement is redone; the best
// placement seen is kept (fewest pieces on ties). Pieces of one unit that land on the same rank are
// merged. Units without heads are skipped.
Plan planWork(const std::vector<WorkUnit>& units, int ranks, const PlanOptions& options = {});

// The pieces of `plan` in the order a queue hands them out: largest first (equal costs keep the plan's
// order). A queue uses the plan's pieces: whole units where whole units balance, a unit's heads split only
// where they cannot (fewer units than ranks, or one unit much larger than the others). Cutting the last
// units finer, so that ranks finish closer together, was measured slower (4 GPUs, 28 entries of 32 heads:
// 7.7-7.9 s against 7.1-7.2 s): the tuner probes a unit's heads together, so a piece of a few heads takes as
// many engine runs as its whole unit (1592 runs against 1102), and the runs' fixed costs outweighed the
// finer balance.
std::vector<Piece> queueOrder(const Plan& plan);

// Who runs which piece. Piece indices are the same on every rank (pieces ordered by unit, then first
// head): rank 0 assembles units from them in order, whichever rank sent a piece.
struct Schedule {
  int ranks = 1;
  std::vector<Piece> pieces;
  std::vector<std::vector<int>> initial;  // per rank: the pieces it starts with, in order
  std::vector<int> shared;  // handed out by rank 0 in this order, one per request; empty: nothing to ask for
  bool queue = false;       // pieces go to ranks as they become free (else: a plan, fixed up front)
  double imbalance = 1;     // a plan's estimated load imbalance (makespan / mean load)

  std::string describe() const;  // "a queue of 14 pieces", "a fixed plan of 6 pieces"
};

// Every rank's pieces of `plan`, up front.
Schedule fixedSchedule(const Plan& plan);

// A queue of `pieces` (in hand-out order): ranks 0 … N-1 take the first N, ranks N-1 … 0 the next N, with
// no round trip (rank 0 is as busy starting up as the others and could not answer yet); rank 0 hands out
// the rest as ranks ask, each rank asking for its next piece when it starts one.
Schedule queueSchedule(std::vector<Piece> pieces, int ranks);

}  // namespace sparge::scaleout
