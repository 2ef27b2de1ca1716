#include "curves.h"

#include <algorithm>
#include <cmath>

#include "background.h"
#include "sparge/core/error.h"

namespace sparge::gui {

SweepGrid defaultGrid(core::SelectMode mode, double currentTheta, int points) {
  SweepGrid g;
  g.mode = mode;
  g.thetas = {-0.1, 0.2, 0.4, 0.6, 0.8};
  if (std::none_of(g.thetas.begin(), g.thetas.end(),
                   [&](double t) { return std::abs(t - currentTheta) < 1e-9; }))
    g.thetas.push_back(currentTheta);
  std::sort(g.thetas.begin(), g.thetas.end());
  points = std::clamp(points, 2, 1000);
  for (int i = 0; i < points; ++i) {
    double f = double(i) / double(points - 1);
    // τ: 1 − τ from 0.5 down to 0.001, geometrically, because sparsity changes fastest near τ = 1.
    // top-k: from 2 % to every block, geometrically.
    g.sels.push_back(mode == core::SelectMode::Cdf ? 1.0 - 0.5 * std::pow(0.002, f)
                                                   : 0.02 * std::pow(50.0, f));
  }
  std::sort(g.sels.begin(), g.sels.end());
  return g;
}

core::HeadParams pointParams(const core::HeadParams& base, const SweepGrid& grid, size_t t, size_t s) {
  core::HeadParams p = base;
  p.dense = false;
  p.mode = grid.mode;
  p.theta = grid.thetas[t];
  if (grid.mode == core::SelectMode::Cdf) {
    p.tau = grid.sels[s];
  } else {
    p.topk = std::min(1.0, grid.sels[s]);
  }
  return p;
}

std::vector<size_t> paretoFront(const std::vector<CurvePoint>& points) {
  std::vector<size_t> done;
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].done) done.push_back(i);
  }
  auto sp = [&](size_t i) { return points[i].figures.sparsity.total(); };
  auto err = [&](size_t i) { return points[i].figures.error.l1(); };
  // Sparsest first; a point is on the front when no sparser point has as little error and no equally
  // sparse point has less.
  std::sort(done.begin(), done.end(), [&](size_t a, size_t b) {
    return sp(a) != sp(b) ? sp(a) > sp(b) : err(a) != err(b) ? err(a) < err(b) : a < b;
  });
  std::vector<size_t> front;
  double bestAbove = INFINITY;  // least error among strictly sparser points
  for (size_t g = 0; g < done.size();) {
    size_t end = g;
    while (end < done.size() && sp(done[end]) == sp(done[g])) ++end;
    double groupMin = err(done[g]);
    for (size_t k = g; k < end && err(done[k]) == groupMin; ++k) {
      if (groupMin < bestAbove) front.push_back(done[k]);
    }
    bestAbove = std::min(bestAbove, groupMin);
    g = end;
  }
  std::reverse(front.begin(), front.end());
  return front;
}

bool CurveController::stale() const {
  if (!data_) return false;
  const core::RunConfig& now = runs_.config();
  const core::RunConfig& then = data_->config;
  if (core_.capture.entryName != data_->entry || !(now.geometry == then.geometry) ||
      now.numerics != then.numerics || now.smoothK != then.smoothK || now.sink != then.sink ||
      now.diagonal != then.diagonal)
    return true;
  // θ and τ / top-k are what the sweep varies; λ is each head's own.
  for (const auto& h : data_->heads) {
    if (now.forHead(h.head).lambda != then.forHead(h.head).lambda) return true;
  }
  return false;
}

void CurveController::cancel() {
  if (!running_) return;
  ++ticket_;
  running_ = false;
  core_.cancel(JobKind::Curves);
}

void CurveController::reset(ResetScope) {
  cancel();
  data_.reset();
  ++generation_;
}

void CurveController::sweep(SweepScope scope, int points) {
  const core::EntryInfo* info = core_.capture.info();
  if (!info) return;
  cancel();
  auto set = std::make_shared<CurveSet>();
  set->entry = info->name;
  set->info = *info;
  set->config = runs_.config();
  const core::HeadParams& sel = set->config.forHead(core_.capture.selected.head);
  set->grid = defaultGrid(sel.mode, sel.theta, points);
  const size_t n = set->grid.thetas.size() * set->grid.sels.size();
  std::vector<int64_t> heads;
  if (scope == SweepScope::SelectedHead) {
    heads = {core_.capture.selected.head};
  } else {
    for (int64_t h = 0; h < info->headsQ; ++h) heads.push_back(h);
  }
  for (int64_t h : heads) set->heads.push_back(HeadCurves{h, std::vector<CurvePoint>(n), {}});
  set->total = n;
  data_ = set;
  ++generation_;
  running_ = true;

  auto job = std::make_shared<SliceJob<std::vector<CurvePoint>>>();
  job->kind = JobKind::Curves;
  job->count = n;
  uint64_t ticket = ++ticket_, epoch = core_.epoch;
  auto backend = core_.backend;
  job->current = [this, ticket, epoch] { return ticket == ticket_ && epoch == core_.epoch; };
  const core::RunConfig base = set->config;
  const SweepGrid grid = set->grid;
  job->work = [backend, base, grid, heads, name = info->name](size_t k, const core::CancelFlag& cancel) {
    if (!backend->entry || backend->entry->info.name != name) throw Error("curves", "the entry changed");
    size_t t = k / grid.sels.size(), s = k % grid.sels.size();
    core::RunConfig c = base;
    c.perHead.resize(static_cast<size_t>(backend->entry->info.headsQ), base.defaults);
    for (int64_t h : heads) c.perHead[h] = pointParams(base.forHead(h), grid, t, s);
    core::RunOptions opt;
    opt.heads = heads;
    opt.computeError = true;
    opt.cancel = &cancel;
    core::EntryResult r = backend->ensureEngine().run(c, opt);
    std::vector<CurvePoint> out;
    for (int64_t h : heads) out.push_back(CurvePoint{c.perHead[h], figuresOf(r, h), true});
    return out;
  };
  job->apply = [this, set](size_t k, std::vector<CurvePoint> points) {
    for (size_t i = 0; i < points.size() && i < set->heads.size(); ++i) set->heads[i].points[k] = points[i];
    for (auto& h : set->heads) h.pareto = paretoFront(h.points);
    ++set->done;
    ++generation_;
  };
  job->finished = [this] { running_ = false; };
  runInSlices<std::vector<CurvePoint>>(core_, job, 0);
}

}  // namespace sparge::gui
