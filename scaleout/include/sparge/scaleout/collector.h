// Rank 0's side of a schedule: gathers the pieces of each unit as they arrive from any rank and hands over
// whole units in unit order, so that output is printed and written as one process would.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sparge/scaleout/partition.h"

namespace sparge::scaleout {

class UnitCollector {
 public:
  // `pieces`: every piece of the job, indexed as on every rank (Schedule::pieces).
  UnitCollector(const std::vector<Piece>& pieces, size_t units);

  // Stores the payload of piece `piece` (an index into `pieces`).
  void add(int piece, std::string payload);
  // Hands every unit whose pieces have all arrived to `ready`, in unit order, stopping at the first
  // unit still missing a piece. Payloads come in piece order (ascending heads). Units without pieces
  // are handed over with no payload.
  void drain(const std::function<void(size_t unit, std::vector<std::string>& payloads)>& ready);
  // Units not handed over yet, with the payloads received so far and whether that is all of them (for
  // an interrupted or failed job).
  void remaining(
      const std::function<void(size_t unit, std::vector<std::string>& payloads, bool all)>& partial);
  size_t handedOver() const { return next_; }

 private:
  std::vector<std::vector<int>> piecesOfUnit_;
  std::vector<std::string> payloads_;  // per piece
  std::vector<bool> arrived_;
  size_t next_ = 0;
};

}  // namespace sparge::scaleout
