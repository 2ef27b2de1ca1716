#include "checks.h"

#include <cmath>
#include <cstdio>

#include "sparge/core/names.h"

namespace sparge::gui {
namespace {

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

const EvalHead* findEvalHead(const EvalReport& r, const std::string& entry, std::optional<int64_t> layer,
                             int64_t head) {
  for (const EvalHead& h : r.heads)
    if (h.head == head && h.entry == entry) return &h;
  if (layer)
    for (const EvalHead& h : r.heads)
      if (h.head == head && h.layer == layer) return &h;
  return nullptr;
}

}  // namespace

void ChecksModel::setParams(const std::string& path, core::ParamsFile file) {
  params_ = std::move(file);
  paramsPath_ = path;
  ++generation_;
}

void ChecksModel::setEval(const std::string& path, EvalReport report) {
  eval_ = std::move(report);
  evalPath_ = path;
  ++generation_;
}

void ChecksModel::clear() {
  params_.reset();
  eval_.reset();
  paramsPath_.clear();
  evalPath_.clear();
  ++generation_;
}

std::optional<double> ChecksModel::budget() const {
  return params_ ? std::optional<double>(params_->l2) : std::nullopt;
}

std::vector<uint8_t> ChecksModel::exactHeads(const std::string& entry, std::optional<int64_t> layer,
                                             int64_t headsQ) const {
  if (!params_) return {};
  const core::ParamsGroup* g = core::findGroup(*params_, entry, layer);
  if (!g || g->headsQ != headsQ) return {};
  std::vector<uint8_t> exact(size_t(headsQ), 0);
  bool any = false;
  for (const core::ParamsHead& h : g->heads)
    if (core::numericsOf(*params_, h) != params_->numerics) {
      exact[size_t(h.head)] = 1;
      any = true;
    }
  return any ? exact : std::vector<uint8_t>{};
}

HeadMarks ChecksModel::marks(const std::string& entry, std::optional<int64_t> layer, int64_t head) const {
  HeadMarks m;
  const core::ParamsGroup* g = params_ ? core::findGroup(*params_, entry, layer) : nullptr;
  const core::ParamsHead* ph = nullptr;
  if (g)
    for (const core::ParamsHead& h : g->heads)
      if (h.head == head) ph = &h;
  if (ph && core::numericsOf(*params_, *ph) != params_->numerics) {
    m.exact = true;
    m.lines.push_back("exact numerics: its dense L1 in " + std::string(core::toString(params_->numerics)) +
                      (std::isfinite(ph->l1Quant) ? fmt(" (%.3g)", ph->l1Quant) : std::string()) +
                      " breaks the budget; deploy it on a full-precision kernel");
  }
  if (ph && ph->heldOut && ph->heldOut->violations > 0) {
    m.heldOutOver = true;
    m.lines.push_back(fmt("held-out: over the budget L1 %g on %.0f of %.0f inputs it was not tuned on",
                          params_->l2, double(ph->heldOut->violations), double(ph->heldOut->inputs)) +
                      fmt(", up to %.4g on ", ph->heldOut->maxL1) + core::printable(ph->heldOut->maxL1Entry));
  }
  if (eval_)
    if (const EvalHead* e = findEvalHead(*eval_, entry, layer, head); e && e->overBudget) {
      m.evalOver = true;
      m.lines.push_back(
          fmt("evaluation: L1 %.4g (max %.4g) over the budget %g", e->l1, e->l1Max, e->budgetL1) +
          fmt(" over %.0f input(s)", double(e->inputs)) +
          (eval_->engine.empty() ? std::string() : ", engine " + eval_->engine));
    }
  return m;
}

}  // namespace sparge::gui
