#include "summary_table.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "sparge/core/method_knob.h"
#include "sparge/core/tuner.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {
enum Col { kHead, kTheta, kSel, kLambda, kStage1, kPv, kTotal, kL1, kL1Sparse, kL1Quant, kCos, kCount };

struct Column {
  const char* name;
  const char* tip;
};
const Column kColumns[kCount] = {
    {"h", "query head (batch/head when B > 1); * = per-head override"},
    {"\xce\xb8", "simthreshd1: blocks whose self-similarity s <= theta are forced on"},
    {"\xcf\x84/k", "cdfthreshd tau (keep blocks while the row CDF <= tau) or the top-k fraction"},
    {"\xce\xbb", "pvthreshd lambda: skip PV when the row max rises by less than -lambda (base 2)"},
    {"st1", "stage-1 sparsity: valid blocks not selected (exact denominators)"},
    {"PV", "PV-skip rate: selected blocks whose PV product was skipped"},
    {"total", "total sparsity: valid blocks whose PV was not computed"},
    {"L1",
     "deployed L1 = sum|O - Oref| / sum|Oref| against the dense fp32 reference, sparse and in the chosen "
     "numerics; "
     "red = over budget"},
    {"L1 sp", "l1_sparse: the same mask and lambda in exact numerics (what sparsity alone costs)"},
    {"L1 q", "l1_quant: every valid block, no skip, in the chosen numerics (what quantization alone costs)"},
    {"cos", "cosine similarity of O and Oref (deployed); the tooltip of a row gives the parts'"},
};

double sortKey(const core::HeadResult& h, int column) {
  switch (column) {
    case kTheta:
      return h.params.theta;
    case kSel:
      return h.params.mode == core::SelectMode::TopK ? h.params.topk : h.params.tau;
    case kLambda:
      return h.params.lambda;
    case kStage1:
      return h.sparsity.stage1();
    case kPv:
      return h.sparsity.pvSkipRate();
    case kTotal:
      return h.sparsity.total();
    case kL1:
      return h.error.l1();
    case kL1Sparse:
      return std::isfinite(measuredL1(h.errorSparse)) ? h.errorSparse.l1() : -1;
    case kL1Quant:
      return std::isfinite(measuredL1(h.errorQuant)) ? h.errorQuant.l1() : -1;
    case kCos:
      return h.error.cosSim();
    default:
      return double(h.batch) * 1e6 + double(h.head);
  }
}

// `method`: another block predictor's parameters take the θ and τ columns (docs/methods.md).
void drawParams(const core::HeadParams& p, core::Method method) {
  if (p.dense) {
    ImGui::TextDisabled("dense");
    ImGui::TableNextColumn();
    ImGui::TextDisabled("-");
    ImGui::TableNextColumn();
    ImGui::TextDisabled("-");
    return;
  }
  // As short as the value allows (-0.1, 0.312, 0.95, 0.9531): the columns are sized to their content; the
  // head detail and the tuning table give more digits.
  if (method != core::Method::SpargeAttn) {
    ImGui::TextUnformatted(core::describeMethodParams(method, p).c_str());
    ImGui::TableNextColumn();
  } else {
    ImGui::Text("%.3g", p.theta);
    ImGui::TableNextColumn();
  }
  if (method != core::Method::SpargeAttn) {
    ImGui::TextDisabled("-");
  } else if (p.mode == core::SelectMode::TopK) {
    ImGui::Text("k %.4g", p.topk);
  } else {
    ImGui::Text("%.4g", p.tau);
  }
  ImGui::TableNextColumn();
  if (p.lambda >= core::kNoPvSkipLambda * 0.5) {
    ImGui::TextDisabled("off");
  } else {
    ImGui::Text("%.3g", p.lambda);
  }
}
}  // namespace

void SummaryTable::sortRows(const core::EntryResult& r) {
  order_.resize(r.heads.size());
  std::iota(order_.begin(), order_.end(), size_t{0});
  ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs();
  if (!specs || specs->SpecsCount == 0) return;
  const ImGuiTableColumnSortSpecs& sp = specs->Specs[0];
  bool descending = sp.SortDirection == ImGuiSortDirection_Descending;
  std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
    double ka = sortKey(r.heads[a], sp.ColumnUserID), kb = sortKey(r.heads[b], sp.ColumnUserID);
    return descending ? ka > kb : ka < kb;
  });
}

void SummaryTable::drawRow(Session& s, const core::HeadResult& h, size_t index, bool multiBatch) {
  bool over = overBudget(h, s.tuning().budget());
  ImGui::TableNextRow();
  if (over) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, colors::kOverBudget);
  ImGui::TableNextColumn();
  char label[48];
  const char* mark = s.runs().hasOverride(h.head) ? " *" : "";
  if (multiBatch) {
    std::snprintf(label, sizeof label, "%lld/%lld%s", (long long)h.batch, (long long)h.head, mark);
  } else {
    std::snprintf(label, sizeof label, "%lld%s", (long long)h.head, mark);
  }
  HeadRef sel = s.capture().selected;
  ImGui::PushID(static_cast<int>(index));
  if (ImGui::Selectable(label, sel.batch == h.batch && sel.head == h.head,
                        ImGuiSelectableFlags_SpanAllColumns))
    s.selectHead({h.batch, h.head});
  ImGui::PopID();
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "head %lld: L1 %.5f deployed, %s sparsity alone, %s quantization alone\n"
        "cos %.6f deployed, %s sparsity alone, %s quantization alone (- : not measured)",
        (long long)h.head, h.error.l1(), l1Text(h.errorSparse, 5).c_str(), l1Text(h.errorQuant, 5).c_str(),
        h.error.cosSim(), cosText(h.errorSparse).c_str(), cosText(h.errorQuant).c_str());
  }
  ImGui::TableNextColumn();
  const auto r = s.runs().result();
  drawParams(h.params, r ? r->config.method : core::Method::SpargeAttn);
  for (double v : {h.sparsity.stage1(), h.sparsity.pvSkipRate(), h.sparsity.total()}) {
    ImGui::TableNextColumn();
    ImGui::Text("%.1f%%", 100 * v);
  }
  ImGui::TableNextColumn();
  if (over) {
    ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.45f, 1), "%.4f", h.error.l1());
  } else {
    ImGui::Text("%.4f", h.error.l1());
  }
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(l1Text(h.errorSparse).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(l1Text(h.errorQuant).c_str());
  ImGui::TableNextColumn();
  ImGui::Text("%.4f", h.error.cosSim());  // six decimals in the row tooltip
}

// The model-level evaluation's line (eval.json) and the heads the loaded files mark, under the totals.
void SummaryTable::drawChecks(const Session& s, const core::EntryResult& r) const {
  const ChecksModel& c = s.checks();
  if (c.eval()) {
    ImGui::PushStyleColor(ImGuiCol_Text, colors::kGood);
    ImGui::TextWrapped("model: %s", c.eval()->summary.line.c_str());
    ImGui::PopStyleColor();
    itemTooltip(("evaluation report " + c.evalPath() +
                 (c.eval()->engine.empty() ? "" : ", engine " + c.eval()->engine) +
                 (c.eval()->device.empty() ? "" : " on " + c.eval()->device))
                    .c_str());
  }
  int exact = 0, bad = 0;
  for (int64_t h = 0; h < r.info.headsQ; ++h) {
    const HeadMarks m = c.marks(r.info.name, r.info.layer, h);
    exact += m.exact ||
             (r.config.numerics != core::Numerics::None && r.config.numericsFor(h) == core::Numerics::None);
    bad += m.bad();
  }
  if (exact > 0) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kExact), "%d head%s in exact numerics", exact,
                       exact == 1 ? "" : "s");
    itemTooltip(
        "The exact fallback: quantization alone breaks these heads' budget, so the parameters run them "
        "in exact numerics (deploy them on a full-precision kernel). Marked blue in the head grid.");
  }
  if (bad > 0) {
    if (exact > 0) ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kBad),
                       "%d head%s over budget (held-out / evaluation)", bad, bad == 1 ? "" : "s");
    itemTooltip(
        "From the parameter file's held-out validation or the evaluation report; marked red in the head "
        "grid and the overview (hover a head for the input and the figure).");
  }
}

void SummaryTable::draw(Session& s, UiState&) {
  auto r = s.runs().result();
  char right[128] = "";
  if (r) {
    int over = 0;
    for (const auto& h : r->heads) over += overBudget(h, s.tuning().budget());
    std::snprintf(right, sizeof right, "%d overrides, %d over budget", s.runs().overrideCount(), over);
  }
  panelHeader("Summary", right);
  if (!r) {
    ImGui::TextDisabled("No results yet.");
    return;
  }
  // Two short lines: ImGui wraps after a '.', which would split a number.
  ImGui::TextWrapped("entry (%s, %s): stage-1 %.1f %%  PV skip %.1f %%  total %.1f %%",
                     core::toString(r->config.numerics), r->config.geometry.label().c_str(),
                     100 * r->sparsity.stage1(), 100 * r->sparsity.pvSkipRate(), 100 * r->sparsity.total());
  const std::string sparsityPart = r->splitPending ? "..." : l1Text(r->errorSparse);  // its pass still runs
  ImGui::TextWrapped("L1 %.4f (sparsity %s, quantization %s)  cos %.5f", r->error.l1(), sparsityPart.c_str(),
                     l1Text(r->errorQuant).c_str(), r->error.cosSim());
  drawChecks(s, *r);
  // Columns refit to their figures every frame (never clipped, also after a tune widens them); a narrow
  // panel scrolls sideways, the head column stays.
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollX | ImGuiTableFlags_ScrollY |
                          ImGuiTableFlags_Sortable | ImGuiTableFlags_BordersInnerV |
                          ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Hideable;
  // Narrow cell padding: eleven columns of figures fit the default right panel at 1600 px.
  ImGui::PushStyleVar(ImGuiStyleVar_CellPadding, ImVec2(2, ImGui::GetStyle().CellPadding.y));
  const bool open = ImGui::BeginTable("summary", kCount, flags);
  ImGui::PopStyleVar();
  if (!open) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  for (int c = 0; c < kCount; ++c) {
    ImGui::TableSetupColumn(kColumns[c].name, c == kHead ? ImGuiTableColumnFlags_DefaultSort : 0, 0.0f, c);
  }
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  for (int c = 0; c < kCount; ++c) {  // header tooltips explain every number
    ImGui::TableSetColumnIndex(c);
    ImGui::PushID(c);
    ImGui::TableHeader(ImGui::TableGetColumnName(c));
    ImGui::PopID();
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kColumns[c].tip);
  }
  sortRows(*r);
  bool multiBatch = r->info.batch > 1;
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(order_.size()));
  while (clipper.Step()) {
    for (int k = clipper.DisplayStart; k < clipper.DisplayEnd; ++k)
      drawRow(s, r->heads[order_[k]], order_[k], multiBatch);
  }
  ImGui::EndTable();
}

}  // namespace sparge::gui
