// Splitting a job over ranks: the cost model of an entry, and a cost-balanced, deterministic plan that
// gives whole units (tuning groups, entries) to ranks and splits a unit's heads only where whole units
// cannot be balanced (for example fewer entries than ranks).
#pragma once

#include <cstdint>
#include <vector>

#include "sparge/core/types.h"

namespace sparge::dist {

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
  int rank = 0;
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

}  // namespace sparge::dist
