// In-order hand-over of units assembled from pieces.
#include "sparge/scaleout/collector.h"

#include "sparge/core/error.h"

namespace sparge::scaleout {

UnitCollector::UnitCollector(const std::vector<Piece>& pieces, size_t units)
    : piecesOfUnit_(units), payloads_(pieces.size()), arrived_(pieces.size(), false) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    const size_t u = size_t(pieces[i].unit);
    if (u >= units) throw Error("plan", "piece " + std::to_string(i) + " names unit " + std::to_string(u));
    piecesOfUnit_[u].push_back(int(i));
  }
}

void UnitCollector::add(int piece, std::string payload) {
  if (piece < 0 || size_t(piece) >= payloads_.size())
    throw Error("job", "a rank sent piece " + std::to_string(piece) + " of a job with " +
                           std::to_string(payloads_.size()) +
                           " pieces — are all ranks running the same command?");
  if (arrived_[size_t(piece)]) throw Error("job", "piece " + std::to_string(piece) + " arrived twice");
  arrived_[size_t(piece)] = true;
  payloads_[size_t(piece)] = std::move(payload);
}

void UnitCollector::drain(const std::function<void(size_t, std::vector<std::string>&)>& ready) {
  for (; next_ < piecesOfUnit_.size(); ++next_) {
    const std::vector<int>& pieces = piecesOfUnit_[next_];
    for (int p : pieces)
      if (!arrived_[size_t(p)]) return;
    std::vector<std::string> parts;
    for (int p : pieces) parts.push_back(std::move(payloads_[size_t(p)]));
    ready(next_, parts);
  }
}

void UnitCollector::remaining(const std::function<void(size_t, std::vector<std::string>&, bool)>& partial) {
  for (size_t u = next_; u < piecesOfUnit_.size(); ++u) {
    std::vector<std::string> parts;
    bool all = true;
    for (int p : piecesOfUnit_[u]) {
      if (arrived_[size_t(p)])
        parts.push_back(std::move(payloads_[size_t(p)]));
      else
        all = false;
    }
    partial(u, parts, all);
  }
  next_ = piecesOfUnit_.size();
}

}  // namespace sparge::scaleout
