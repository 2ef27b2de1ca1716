// Sweeping the selected head in several token orders, for the curves view's overlay.
#include "order_curves.h"

#include "background.h"
#include "sparge/core/error.h"

namespace sparge::gui {

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

void OrderCurveController::sweep(int points) {
  const core::EntryInfo* captured = core_.capture.find(core_.capture.entryName);
  if (!captured || !core_.capture.loaded) return;
  cancel();
  auto set = std::make_shared<OrderCurveSet>();
  set->entry = captured->name;
  set->head = core_.capture.selected.head;
  set->config = runs_.config();
  const core::HeadParams& own = set->config.forHead(set->head);
  set->grid = defaultGrid(own.mode, own.theta, points);
  const size_t n = set->grid.thetas.size() * set->grid.sels.size();
  for (core::Permutation p :
       {core::Permutation::None, core::Permutation::TimeMajor, core::Permutation::Hilbert})
    if (core::permutationProblem(*captured, p).empty())
      set->orders.push_back(OrderCurves{p, std::vector<CurvePoint>(n), {}});
  set->total = n * set->orders.size();
  data_ = set;
  ++generation_;
  running_ = true;

  auto job = std::make_shared<SliceJob<CurvePoint>>();
  job->kind = JobKind::OrderCurves;
  job->count = set->total;
  const uint64_t ticket = ++ticket_, epoch = core_.epoch;
  job->current = [this, ticket, epoch] { return ticket == ticket_ && epoch == core_.epoch; };
  auto backend = core_.backend;
  std::vector<core::Permutation> orders;
  for (const auto& o : set->orders) orders.push_back(o.order);
  // Order-major, so that the second engine changes its entry once per order.
  job->work = [backend, base = set->config, grid = set->grid, orders, head = set->head, name = set->entry, n](
                  size_t k, const core::CancelFlag& cancel) {
    if (!backend->orders || backend->orders->base()->info.name != name)
      throw Error("curves", "the entry changed");
    const std::shared_ptr<const core::EntryData> entry = backend->orders->get(orders[k / n], "token order");
    core::Engine& engine = backend->ensureOverviewEngine();
    if (engine.entry() != entry) engine.setEntry(entry);
    const size_t t = (k % n) / grid.sels.size(), s = k % grid.sels.size();
    core::RunConfig c = base;
    c.perHead.assign(size_t(entry->info.headsQ), base.defaults);
    c.perHead[size_t(head)] = pointParams(base.forHead(head), grid, t, s);
    core::RunOptions opt;
    opt.heads = {head};
    opt.cancel = &cancel;
    const core::EntryResult r = engine.run(c, opt);
    return CurvePoint{c.perHead[size_t(head)], figuresOf(r, head), true};
  };
  job->apply = [this, set, n](size_t k, CurvePoint p) {
    OrderCurves& o = set->orders[k / n];
    o.points[k % n] = p;
    o.pareto = paretoFront(o.points);
    ++set->done;
    ++generation_;
  };
  job->finished = [this] { running_ = false; };
  runInSlices<CurvePoint>(core_, job, 0);
}

}  // namespace sparge::gui
