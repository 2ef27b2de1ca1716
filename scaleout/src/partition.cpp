// Cost model, the cost-balanced plan (longest-processing-time placement with head splitting) and the
// queue of a dynamic schedule.
#include "sparge/scaleout/partition.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "sparge/core/error.h"

namespace sparge::scaleout {
namespace {

// Sum of visible keys over the queries of an entry: exact up to 4096 queries, else from 4096 evenly
// spaced queries (the visible range changes linearly between them).
double attendedPairs(const core::EntryInfo& e) {
  const int64_t samples = std::min<int64_t>(e.tokensQ, 4096);
  double sum = 0;
  for (int64_t s = 0; s < samples; ++s) {
    const int64_t q = samples == e.tokensQ ? s : (s * (e.tokensQ - 1)) / std::max<int64_t>(1, samples - 1);
    const core::KeyRange r = core::visibleKeys(q, e.tokensKV, e.causal, e.window);
    sum += r.empty() ? 0.0 : double(r.last - r.first + 1);
  }
  return sum * double(e.tokensQ) / double(samples);
}

// Cuts `heads` into `k` contiguous ranges of near-equal size (the first ranges take the extra heads).
std::vector<std::vector<int64_t>> cut(const std::vector<int64_t>& heads, int k) {
  std::vector<std::vector<int64_t>> out;
  const size_t n = heads.size(), base = n / size_t(k), extra = n % size_t(k);
  size_t at = 0;
  for (size_t i = 0; i < size_t(k); ++i) {
    const size_t len = base + (i < extra ? 1 : 0);
    out.emplace_back(heads.begin() + ptrdiff_t(at), heads.begin() + ptrdiff_t(at + len));
    at += len;
  }
  return out;
}

// Longest processing time first: pieces by cost (descending; ties by unit, then first head) onto the
// least loaded rank (ties: lowest rank); then pieces of one unit on one rank are merged.
Plan place(const std::vector<WorkUnit>& units, const std::vector<int>& cuts, int ranks) {
  Plan plan;
  plan.ranks = ranks;
  plan.load.assign(size_t(ranks), 0.0);
  std::vector<Piece> pieces;
  for (size_t u = 0; u < units.size(); ++u)
    if (!units[u].heads.empty())
      for (std::vector<int64_t>& heads : cut(units[u].heads, cuts[u]))
        pieces.push_back(Piece{int(u), heads, units[u].costPerHead * double(heads.size()), 0});
  std::vector<size_t> order(pieces.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return pieces[a].cost > pieces[b].cost; });
  for (size_t i : order) {
    const auto it = std::min_element(plan.load.begin(), plan.load.end());
    pieces[i].rank = int(it - plan.load.begin());
    *it += pieces[i].cost;
  }
  std::map<std::pair<int, int>, size_t> merged;  // (unit, rank) -> index in plan.pieces
  for (const Piece& p : pieces) {
    const auto [it, fresh] = merged.try_emplace({p.unit, p.rank}, plan.pieces.size());
    if (fresh) {
      plan.pieces.push_back(p);
      continue;
    }
    Piece& same = plan.pieces[it->second];
    same.heads.insert(same.heads.end(), p.heads.begin(), p.heads.end());
    std::sort(same.heads.begin(), same.heads.end());
    same.cost += p.cost;
  }
  std::stable_sort(plan.pieces.begin(), plan.pieces.end(), [](const Piece& a, const Piece& b) {
    return a.unit != b.unit ? a.unit < b.unit : a.heads.front() < b.heads.front();
  });
  return plan;
}

}  // namespace

double headCost(const core::EntryInfo& e) {
  return double(e.batch) * attendedPairs(e) * double(e.headDim);
}

std::vector<int> Plan::piecesOf(int rank) const {
  std::vector<int> out;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].rank == rank) out.push_back(int(i));
  return out;
}

double Plan::makespan() const {
  return load.empty() ? 0.0 : *std::max_element(load.begin(), load.end());
}

double Plan::imbalance() const {
  const double total = std::accumulate(load.begin(), load.end(), 0.0);
  return total > 0 ? makespan() / (total / double(load.size())) : 1.0;
}

Plan planWork(const std::vector<WorkUnit>& units, int ranks, const PlanOptions& options) {
  if (ranks < 1) throw Error("plan", "at least one rank is needed");
  std::vector<int> cuts(units.size(), 1);
  double total = 0, maxHead = 0;
  for (const WorkUnit& u : units) {
    total += u.costPerHead * double(u.heads.size());
    if (!u.heads.empty()) maxHead = std::max(maxHead, u.costPerHead);
  }
  const double ideal = total / double(ranks);
  Plan best = place(units, cuts, ranks);
  const size_t maxPieces = units.size() + 4 * size_t(ranks);
  for (size_t pieces = units.size(); options.splitHeads && pieces < maxPieces; ++pieces) {
    const double span = best.makespan();
    if (span <= ideal * (1.0 + options.tolerance) || span - ideal < maxHead) break;
    // The unit whose pieces are largest gets one more cut.
    int pick = -1;
    double largest = 0;
    for (size_t u = 0; u < units.size(); ++u) {
      if (size_t(cuts[u]) >= units[u].heads.size()) continue;
      const double piece = units[u].costPerHead * double(units[u].heads.size()) / double(cuts[u]);
      if (piece > largest) {
        largest = piece;
        pick = int(u);
      }
    }
    if (pick < 0) break;
    ++cuts[size_t(pick)];
    Plan next = place(units, cuts, ranks);
    if (next.makespan() < best.makespan()) best = std::move(next);
  }
  return best;
}

std::vector<Piece> queueOrder(const Plan& plan) {
  std::vector<Piece> pieces = plan.pieces;
  std::stable_sort(pieces.begin(), pieces.end(), [](const Piece& x, const Piece& y) { return x.cost > y.cost; });
  return pieces;
}

std::string Schedule::describe() const {
  return std::string(queue ? "a queue of " : "a fixed plan of ") + std::to_string(pieces.size()) + " pieces";
}

Schedule fixedSchedule(const Plan& plan) {
  Schedule s;
  s.ranks = plan.ranks;
  s.pieces = plan.pieces;
  for (int r = 0; r < plan.ranks; ++r) s.initial.push_back(plan.piecesOf(r));
  s.imbalance = plan.imbalance();
  return s;
}

Schedule queueSchedule(std::vector<Piece> pieces, int ranks) {
  if (ranks < 1) throw Error("plan", "at least one rank is needed");
  Schedule s;
  s.ranks = ranks;
  s.queue = true;
  s.initial.resize(size_t(ranks));
  for (const Piece& p : pieces)
    if (p.heads.empty()) throw Error("plan", "a piece of unit " + std::to_string(p.unit) + " has no heads");
  // Indices in unit order, as the collector expects; the queue's order is kept in `initial` and `shared`.
  std::vector<size_t> byUnit(pieces.size());
  std::iota(byUnit.begin(), byUnit.end(), size_t(0));
  std::stable_sort(byUnit.begin(), byUnit.end(), [&](size_t a, size_t b) {
    const Piece &x = pieces[a], &y = pieces[b];
    return x.unit != y.unit ? x.unit < y.unit : x.heads.front() < y.heads.front();
  });
  std::vector<int> indexOf(pieces.size());
  for (size_t i = 0; i < byUnit.size(); ++i) {
    indexOf[byUnit[i]] = int(i);
    s.pieces.push_back(pieces[byUnit[i]]);
    s.pieces.back().rank = -1;
  }
  const size_t n = size_t(ranks), first = std::min(pieces.size(), 2 * n);
  for (size_t q = 0; q < pieces.size(); ++q) {
    const int index = indexOf[q];
    if (q >= first) {
      s.shared.push_back(index);
      continue;
    }
    const size_t rank = q < n ? q : 2 * n - 1 - q;
    s.initial[rank].push_back(index);
    s.pieces[size_t(index)].rank = int(rank);
  }
  return s;
}

}  // namespace sparge::scaleout
