// Sweeping the selected head under several token orders or block predictors, for the curves view's overlay.
#include "order_curves.h"

#include <algorithm>
#include <cmath>

#include "background.h"
#include "sparge/core/error.h"
#include "sparge/core/method_knob.h"

namespace sparge::gui {

namespace {

// SpargeAttn's θ × τ (or top-k) grid around the head's own parameters.
std::vector<core::HeadParams> gridParams(const core::HeadParams& own, int points) {
  const SweepGrid grid = defaultGrid(own.mode, own.theta, points);
  std::vector<core::HeadParams> out;
  for (size_t t = 0; t < grid.thetas.size(); ++t)
    for (size_t s = 0; s < grid.sels.size(); ++s) out.push_back(pointParams(own, grid, t, s));
  return out;
}

// About `points` values of a method's knob, the rest of the head's parameters kept: a third evenly over the
// range, a third crowding its top (thresholds and coverages change the mask fastest near 1, as τ does) and
// a third crowding its bottom (shares of lines or blocks: the sparse end).
std::vector<core::HeadParams> knobParams(core::Method m, const core::HeadParams& own,
                                         const core::EntryInfo& info, const core::Geometry& g, int points) {
  const core::KnobRange r = core::knobRange(m, own, info, g);
  const int third = std::max(2, points / 3);
  std::vector<core::HeadParams> out;
  for (int i = 0; i < 3 * third; ++i) {
    const double f = double(i % third) / double(third - 1), crowd = 0.5 * std::pow(0.002, f);
    const double t = i < third ? f : i < 2 * third ? 1.0 - crowd : crowd;
    core::HeadParams p = core::withKnob(m, own, r.lo + (r.hi - r.lo) * t, info, g);
    p.dense = false;
    out.push_back(p);
  }
  return out;
}

// A series' points: SpargeAttn's grid, another method's knob.
std::vector<core::HeadParams> seriesParams(core::Method m, const core::HeadParams& own,
                                           const core::EntryInfo& info, const core::Geometry& g, int points) {
  return m == core::Method::SpargeAttn ? gridParams(own, points) : knobParams(m, own, info, g, points);
}

}  // namespace

void OrderCurveController::cancel() {
  if (!running_) return;
  ++ticket_;
  running_ = false;
  core_.cancel(JobKind::OrderCurves);
}

void OrderCurveController::reset(ResetScope) {
  cancel();
  data_.reset();
  ++generation_;
}

std::shared_ptr<OverlayCurveSet> OrderCurveController::makeSet(int points, OverlayKind kind) const {
  const core::EntryInfo* captured = core_.capture.find(core_.capture.entryName);
  auto set = std::make_shared<OverlayCurveSet>();
  set->kind = kind;
  set->entry = captured->name;
  set->head = core_.capture.selected.head;
  set->config = runs_.config();
  const core::HeadParams& own = set->config.forHead(set->head);
  const core::Geometry& g = set->config.geometry;
  if (kind == OverlayKind::Orders) {
    for (core::Permutation p :
         {core::Permutation::None, core::Permutation::TimeMajor, core::Permutation::Hilbert})
      if (core::permutationProblem(*captured, p).empty())
        set->series.push_back({core::toString(p),
                               p,
                               set->config.method,
                               seriesParams(set->config.method, own, *captured, g, points),
                               {},
                               {}});
  } else {
    const core::EntryInfo* shown = core_.capture.info();  // in the session's token order
    const core::Permutation order = shown ? shown->permutation : core::Permutation::None;
    for (core::Method m : core::kAllMethods)
      set->series.push_back(
          {core::methodLabel(m), order, m, seriesParams(m, own, *captured, g, points), {}, {}});
  }
  for (OverlaySeries& s : set->series) {
    s.points.resize(s.params.size());
    set->total += s.params.size();
  }
  return set;
}

void OrderCurveController::sweep(int points, OverlayKind kind) {
  if (!core_.capture.find(core_.capture.entryName) || !core_.capture.loaded) return;
  cancel();
  auto set = makeSet(points, kind);
  data_ = set;
  ++generation_;
  running_ = true;

  auto job = std::make_shared<SliceJob<CurvePoint>>();
  job->kind = JobKind::OrderCurves;
  job->count = set->total;
  const uint64_t ticket = ++ticket_, epoch = core_.epoch;
  job->current = [this, ticket, epoch] { return ticket == ticket_ && epoch == core_.epoch; };
  // Series-major, so that the second engine changes its entry (or method) once per series.
  std::vector<std::pair<size_t, size_t>> index;  // k -> (series, point)
  for (size_t i = 0; i < set->series.size(); ++i)
    for (size_t j = 0; j < set->series[i].params.size(); ++j) index.emplace_back(i, j);
  job->work = [backend = core_.backend, set, index](size_t k, const core::CancelFlag& cancel) {
    if (!backend->orders || backend->orders->base()->info.name != set->entry)
      throw Error("curves", "the entry changed");
    const OverlaySeries& s = set->series[index[k].first];
    const std::shared_ptr<const core::EntryData> entry = backend->orders->get(s.order, "token order");
    core::Engine& engine = backend->ensureOverviewEngine();
    if (engine.entry() != entry) engine.setEntry(entry);
    core::RunConfig c = set->config;
    c.method = s.method;
    c.perHead.assign(size_t(entry->info.headsQ), c.defaults);
    c.perHead[size_t(set->head)] = s.params[index[k].second];
    core::RunOptions opt;
    opt.heads = {set->head};
    opt.cancel = &cancel;
    const core::EntryResult r = engine.run(c, opt);
    return CurvePoint{c.perHead[size_t(set->head)], figuresOf(r, set->head), true};
  };
  job->apply = [this, set, index](size_t k, CurvePoint p) {
    OverlaySeries& s = set->series[index[k].first];
    s.points[index[k].second] = p;
    s.pareto = paretoFront(s.points);
    ++set->done;
    ++generation_;
  };
  job->finished = [this] { running_ = false; };
  runInSlices<CurvePoint>(core_, job, 0);
}

}  // namespace sparge::gui
