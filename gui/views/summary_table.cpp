#include "summary_table.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "sparge/core/tuner.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {
enum Col { kHead, kTheta, kSel, kLambda, kStage1, kPv, kTotal, kL1, kCos, kCount };
}

void SummaryTable::draw(Session& s, UiState&) {
  auto r = s.result();
  char right[128] = "";
  if (r) {
    int over = 0;
    for (const auto& h : r->heads) over += overBudget(h, s.budget());
    std::snprintf(right, sizeof right, "%d overrides, %d over budget", s.overrideCount(), over);
  }
  panelHeader("Summary", right);
  if (!r) {
    ImGui::TextDisabled("No results yet.");
    return;
  }
  ImGui::Text("entry: stage-1 %.1f %%  PV skip %.1f %%  total %.1f %%  L1 %.4f  cos %.5f", 100 * r->sparsity.stage1(),
              100 * r->sparsity.pvSkipRate(), 100 * r->sparsity.total(), r->error.l1(), r->error.cosSim());
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_Sortable |
                          ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_Resizable |
                          ImGuiTableFlags_Hideable;
  if (!ImGui::BeginTable("summary", kCount, flags)) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  ImGui::TableSetupColumn("head", ImGuiTableColumnFlags_DefaultSort, 0.9f, kHead);
  ImGui::TableSetupColumn("\xce\xb8", 0, 0.8f, kTheta);
  ImGui::TableSetupColumn("\xcf\x84/k", 0, 1.0f, kSel);
  ImGui::TableSetupColumn("\xce\xbb", 0, 0.7f, kLambda);
  ImGui::TableSetupColumn("st1", 0, 0.9f, kStage1);
  ImGui::TableSetupColumn("PV", 0, 0.9f, kPv);
  ImGui::TableSetupColumn("total", 0, 0.9f, kTotal);
  ImGui::TableSetupColumn("L1", 0, 0.9f, kL1);
  ImGui::TableSetupColumn("cos", 0, 1.0f, kCos);
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);

  // Header tooltips explain every number.
  static const char* tips[kCount] = {
      "query head (batch item when B > 1); * = per-head override",
      "simthreshd1: blocks whose self-similarity s <= theta are forced on",
      "cdfthreshd tau (keep blocks while the row CDF <= tau) or the top-k fraction",
      "pvthreshd lambda: skip PV when the row max rises by less than -lambda (base 2)",
      "stage-1 sparsity: valid blocks not selected (exact causal denominators)",
      "PV-skip rate: selected blocks whose PV product was skipped",
      "total sparsity: valid blocks whose PV was not computed",
      "L1 = sum|O - Oref| / sum|Oref| against the dense fp32 reference; red = over budget",
      "cosine similarity of O and Oref"};
  for (int c = 0; c < kCount; ++c) {
    ImGui::TableSetColumnIndex(c);
    ImGui::PushID(c);
    ImGui::TableHeader(ImGui::TableGetColumnName(c));
    ImGui::PopID();
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tips[c]);
  }

  order_.resize(r->heads.size());
  std::iota(order_.begin(), order_.end(), size_t{0});
  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsCount > 0) {
    const ImGuiTableColumnSortSpecs& sp = specs->Specs[0];
    auto key = [&](const core::HeadResult& h) -> double {
      switch (sp.ColumnUserID) {
        case kTheta: return h.params.theta;
        case kSel: return h.params.mode == core::SelectMode::TopK ? h.params.topk : h.params.tau;
        case kLambda: return h.params.lambda;
        case kStage1: return h.sparsity.stage1();
        case kPv: return h.sparsity.pvSkipRate();
        case kTotal: return h.sparsity.total();
        case kL1: return h.error.l1();
        case kCos: return h.error.cosSim();
        default: return double(h.batch) * 1e6 + double(h.head);
      }
    };
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
      double ka = key(r->heads[a]), kb = key(r->heads[b]);
      return sp.SortDirection == ImGuiSortDirection_Descending ? ka > kb : ka < kb;
    });
  }

  HeadRef sel = s.selectedHead();
  bool multiBatch = r->info.batch > 1;
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(order_.size()));
  while (clipper.Step()) {
    for (int k = clipper.DisplayStart; k < clipper.DisplayEnd; ++k) {
      const core::HeadResult& h = r->heads[order_[k]];
      bool over = overBudget(h, s.budget());
      ImGui::TableNextRow();
      if (over) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, colors::kOverBudget);
      ImGui::TableNextColumn();
      char label[48];
      if (multiBatch) {
        std::snprintf(label, sizeof label, "%lld/%lld%s", (long long)h.batch, (long long)h.head, s.hasOverride(h.head) ? " *" : "");
      } else {
        std::snprintf(label, sizeof label, "%lld%s", (long long)h.head, s.hasOverride(h.head) ? " *" : "");
      }
      bool isSel = sel.batch == h.batch && sel.head == h.head;
      ImGui::PushID(static_cast<int>(order_[k]));
      if (ImGui::Selectable(label, isSel, ImGuiSelectableFlags_SpanAllColumns)) s.selectHead({h.batch, h.head});
      ImGui::PopID();
      ImGui::TableNextColumn();
      if (h.params.dense) {
        ImGui::TextDisabled("dense");
        ImGui::TableNextColumn();
        ImGui::TextDisabled("-");
        ImGui::TableNextColumn();
        ImGui::TextDisabled("-");
      } else {
        ImGui::Text("%.3f", h.params.theta);
        ImGui::TableNextColumn();
        if (h.params.mode == core::SelectMode::TopK) {
          ImGui::Text("k %.3f", h.params.topk);
        } else {
          ImGui::Text("%.4f", h.params.tau);
        }
        ImGui::TableNextColumn();
        if (h.params.lambda >= core::kNoPvSkipLambda * 0.5) {
          ImGui::TextDisabled("off");
        } else {
          ImGui::Text("%.3g", h.params.lambda);
        }
      }
      ImGui::TableNextColumn();
      ImGui::Text("%.1f%%", 100 * h.sparsity.stage1());
      ImGui::TableNextColumn();
      ImGui::Text("%.1f%%", 100 * h.sparsity.pvSkipRate());
      ImGui::TableNextColumn();
      ImGui::Text("%.1f%%", 100 * h.sparsity.total());
      ImGui::TableNextColumn();
      if (over) {
        ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.45f, 1), "%.4f", h.error.l1());
      } else {
        ImGui::Text("%.4f", h.error.l1());
      }
      ImGui::TableNextColumn();
      ImGui::Text("%.5f", h.error.cosSim());
    }
  }
  ImGui::EndTable();
}

}  // namespace sparge::gui
