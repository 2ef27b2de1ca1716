// The auto-tuner's public entry points: options, grouping of entries, and the loop over groups. The
// search itself lives in tuner_search.cpp (per-head state machines) and tuner_group.cpp (the stages of
// one group, evaluated in lockstep: one Engine::run per step covers every unfinished head).
#include "sparge/core/tuner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "sparge/core/error.h"
#include "tuner_group.h"

namespace sparge::core {
namespace {

using tuning::Clock;
using tuning::secondsSince;

std::string fmt(double v, int digits = 4) {
  std::ostringstream s;
  s.precision(digits);
  s << v;
  return s.str();
}

}  // namespace

std::vector<double> defaultThetaGrid() {
  std::vector<double> g;
  for (int i = -16; i < 16; ++i) g.push_back(double(i) / 16.0);
  return g;
}

void TuneOptions::validate(const std::string& where) const {
  auto bad = [&](const std::string& what) { throw Error(where, what); };
  if (!(l1 > 0) || !std::isfinite(l1)) bad("l1 must be a positive number (got " + fmt(l1) + ")");
  if (tunePv && (!(l2 > l1) || !std::isfinite(l2)))
    bad("l2 must be larger than l1 when λ is tuned (got l1 = " + fmt(l1) + ", l2 = " + fmt(l2) + ")");
  if (thetaGrid.empty()) bad("the θ grid is empty");
  for (double t : thetaGrid)
    if (!std::isfinite(t)) bad("the θ grid holds a non-finite value");
  if (!(selTolerance > 0 && selTolerance < 1)) bad("the τ / top-k tolerance must be in (0, 1)");
  if (!(lambdaMin >= 0 && lambdaMax > lambdaMin && std::isfinite(lambdaMax)))
    bad("the λ range must satisfy 0 <= min < max");
  if (!(lambdaTolerance > 0)) bad("the λ tolerance must be positive");
  if (!(fixedLambda >= 0) || !std::isfinite(fixedLambda)) bad("the fixed λ must be >= 0");
  if (!(binWidth > 0)) bad("the bin width must be positive");
  if (fallbackTries < 0) bad("fallbackTries must be >= 0");
  sparge::core::validate(methodBase, where, method);
}

const char* toString(ExactFallback f) {
  switch (f) {
    case ExactFallback::Off:
      return "off";
    case ExactFallback::Head:
      return "head";
    case ExactFallback::Entry:
      return "entry";
    case ExactFallback::Layer:
      return "layer";
  }
  return "?";
}

ExactFallback parseExactFallback(const std::string& text) {
  for (ExactFallback f :
       {ExactFallback::Off, ExactFallback::Head, ExactFallback::Entry, ExactFallback::Layer})
    if (text == toString(f)) return f;
  throw Error("--exact-fallback", "unknown value \"" + text + "\" (expected off, head, entry or layer)");
}

const char* toString(ProbePhase p) {
  switch (p) {
    case ProbePhase::Select:
      return "select";
    case ProbePhase::Verify:
      return "verify";
    case ProbePhase::Lambda:
      return "lambda";
    case ProbePhase::Final:
      return "final";
  }
  return "?";
}

const TunedHead* TunedGroup::find(int64_t head) const {
  for (const TunedHead& h : heads)
    if (h.head == head) return &h;
  return nullptr;
}

int64_t TuneResult::headsFinished() const {
  int64_t n = 0;
  for (const TunedGroup& g : groups) n += int64_t(g.heads.size());
  return n;
}

TuneInput TuneInput::fromData(std::shared_ptr<const EntryData> data) {
  TuneInput in;
  in.name = data->info.name;
  in.layer = data->info.layer;
  in.headsQ = data->info.headsQ;
  in.load = [data] { return data; };
  return in;
}

std::vector<TuneGroupInput> makeGroups(const std::vector<TuneInput>& entries, bool byLayer) {
  std::vector<TuneGroupInput> groups;
  std::map<int64_t, size_t> byLayerIndex;
  std::map<std::string, size_t> byName;  // the same entry of several captures
  for (const TuneInput& e : entries) {
    if (byLayer && e.layer) {
      auto it = byLayerIndex.find(*e.layer);
      if (it != byLayerIndex.end()) {
        groups[it->second].entries.push_back(e);
        continue;
      }
      byLayerIndex[*e.layer] = groups.size();
      groups.push_back(TuneGroupInput{"layer " + std::to_string(*e.layer), e.layer, {e}, {}});
      continue;
    }
    auto it = byName.find(e.name);
    if (it != byName.end()) {
      groups[it->second].entries.push_back(e);
      continue;
    }
    byName[e.name] = groups.size();
    groups.push_back(TuneGroupInput{e.name, e.layer, {e}, {}});
  }
  for (TuneGroupInput& g : groups) {
    // A layer whose entries all have one name (one entry of several captures) is named by it.
    bool oneName = true;
    for (const TuneInput& e : g.entries) oneName = oneName && e.name == g.entries[0].name;
    if (oneName) g.name = g.entries[0].name;
    if (!g.layer) continue;
    for (const TuneGroupInput& other : groups)
      if (&other != &g && other.layer == g.layer)
        g.layerPeers.insert(g.layerPeers.end(), other.entries.begin(), other.entries.end());
  }
  return groups;
}

TuneResult tune(Engine& engine, const std::vector<TuneGroupInput>& groups, const TuneOptions& options,
                const TuneCallbacks& callbacks) {
  options.validate("tune options");
  TuneResult result;
  result.options = options;
  result.engine = engine.name();
  const auto start = Clock::now();
  int64_t unitsTotal = 0;
  for (const TuneGroupInput& g : groups) {
    if (g.entries.empty()) throw Error("tune " + g.name, "the group has no entries");
    const int64_t heads = options.heads.empty()
                              ? g.entries[0].headsQ
                              : int64_t(std::set<int64_t>(options.heads.begin(), options.heads.end()).size());
    unitsTotal += heads * int64_t(g.entries.size());
  }
  int64_t unitsBefore = 0;
  for (const TuneGroupInput& g : groups) {
    result.groups.emplace_back();
    TunedGroup& group = result.groups.back();
    const auto t0 = Clock::now();
    try {
      tuning::GroupRunner runner(engine, result.options, callbacks, result, g, group,
                                 tuning::ProgressBase{start, unitsBefore, unitsTotal});
      runner.run();
    } catch (const Cancelled&) {
      group.elapsedSeconds = secondsSince(t0);
      group.complete = false;
      result.cancelled = true;
      result.elapsedSeconds = secondsSince(start);
      return result;
    }
    group.elapsedSeconds = secondsSince(t0);
    if (callbacks.groupFinished) callbacks.groupFinished(group);
    unitsBefore += int64_t(group.heads.size() * g.entries.size());
  }
  result.elapsedSeconds = secondsSince(start);
  return result;
}

TuneResult tuneEntry(Engine& engine, std::shared_ptr<const EntryData> entry, const TuneOptions& options,
                     const TuneCallbacks& callbacks) {
  if (!entry) throw Error("tune", "no entry given");
  std::vector<TuneGroupInput> groups = {
      TuneGroupInput{entry->info.name, entry->info.layer, {TuneInput::fromData(entry)}, {}}};
  return tune(engine, groups, options, callbacks);
}

BinChoice chooseBin(const std::vector<TunePoint>& points, double start, double width) {
  BinChoice best;
  std::map<int, std::vector<const TunePoint*>> bins;
  for (const TunePoint& p : points) {
    // The small epsilon keeps grid values that sit exactly on a bin edge (θ = −14/16) in the upper bin
    // despite rounding in (θ − start) / width.
    const int b = int(std::floor((p.theta - start) / width + 1e-9));
    bins[b].push_back(&p);
  }
  for (const auto& [b, pts] : bins) {
    double sum = 0;
    for (const TunePoint* p : pts) sum += p->sparsity;
    if (best.found && !(sum > best.sumSparsity)) continue;  // ties keep the lower bin (map order)
    best.found = true;
    best.bin = b;
    best.binLow = start + b * width;
    best.binHigh = start + (b + 1) * width;
    best.sumSparsity = sum;
    best.count = int(pts.size());
    best.meanSparsity = sum / double(pts.size());
    best.theta = pts[0]->theta;
    best.sel = pts[0]->sel;
    best.lambda = pts[0]->lambda;
    for (const TunePoint* p : pts) {
      best.theta = std::max(best.theta, p->theta);
      best.sel = std::max(best.sel, p->sel);
      best.lambda = std::max(best.lambda, p->lambda);
    }
  }
  return best;
}

}  // namespace sparge::core
