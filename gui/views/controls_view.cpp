#include "controls_view.h"

#include <imgui.h>

#include <cmath>
#include <cstdio>

#include "sparge/core/tuner.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

void ControlsView::draw(Session& s, UiState& ui) {
  panelHeader("Controls", "changes re-run in the background");
  const core::RunConfig& cfg = s.config();
  HeadRef sel = s.selectedHead();

  // Tuned values are per-head overrides: show them on the sliders (the selected head's), and let the
  // next slider move refine that head instead of resetting every head to the defaults.
  std::string loaded = s.entryInfo() ? s.entryInfo()->name : std::string();
  if (s.tuneGeneration() != seenTuneGeneration_ || loaded != seenEntry_) {
    seenTuneGeneration_ = s.tuneGeneration();
    seenEntry_ = loaded;
    if (s.hasOverride(sel.head)) ui.applyTarget = ApplyTarget::SelectedHead;
  }

  ImGui::TextUnformatted("Apply to");
  ImGui::SameLine();
  int target = static_cast<int>(ui.applyTarget);
  char selLabel[48];
  std::snprintf(selLabel, sizeof selLabel, "head %lld", (long long)sel.head);
  ImGui::RadioButton(selLabel, &target, static_cast<int>(ApplyTarget::SelectedHead));
  itemTooltip("Changes become a per-head override of the selected head (marked * in the grid and table).");
  ImGui::SameLine();
  ImGui::RadioButton("all heads", &target, static_cast<int>(ApplyTarget::AllHeads));
  itemTooltip("Changes set the defaults of every head and clear per-head overrides.");
  ui.applyTarget = static_cast<ApplyTarget>(target);

  core::HeadParams p = ui.applyTarget == ApplyTarget::SelectedHead ? s.paramsFor(sel.head) : cfg.defaults;
  bool changed = false;
  float w = ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("top-k 00").x;
  ImGui::PushItemWidth(std::max(60.0f, w));

  float theta = static_cast<float>(p.theta);
  if (ImGui::SliderFloat("\xce\xb8", &theta, -1.0f, 1.0f, "simthreshd1 %.3f")) {
    p.theta = theta;
    changed = true;
  }
  itemTooltip("Blocks whose self-similarity s <= theta are forced on (whole row / column). -1: none forced.");

  bool topk = p.mode == core::SelectMode::TopK;
  if (ImGui::Checkbox("top-k mode", &topk)) {
    p.mode = topk ? core::SelectMode::TopK : core::SelectMode::Cdf;
    changed = true;
  }
  ImGui::SameLine();
  if (ImGui::Checkbox("dense head", &p.dense)) changed = true;
  itemTooltip("is_sparse = false: every valid block computed, no PV skip.");
  if (topk) {
    float k = static_cast<float>(p.topk);
    if (ImGui::SliderFloat("top-k", &k, 0.01f, 1.0f, "fraction %.3f")) {
      p.topk = k;
      changed = true;
    }
    itemTooltip("Fraction of all K blocks kept per row, by pooled probability.");
  } else {
    float tau = static_cast<float>(p.tau);
    if (ImGui::SliderFloat("\xcf\x84", &tau, 0.0f, 1.0f, "cdfthreshd %.4f")) {
      p.tau = tau;
      changed = true;
    }
    itemTooltip("Keep the most probable blocks of a row while their cumulative pooled probability <= tau.");
  }
  bool noSkip = p.lambda >= core::kNoPvSkipLambda * 0.5;
  float lambda = noSkip ? 100.0f : static_cast<float>(p.lambda);
  if (noSkip) ImGui::BeginDisabled();
  if (ImGui::SliderFloat("\xce\xbb", &lambda, 0.0f, 100.0f, "pvthreshd %.1f")) {
    p.lambda = lambda;
    changed = true;
  }
  if (noSkip) ImGui::EndDisabled();
  itemTooltip("Skip a block's PV product when the row max rises by less than -lambda (base 2). Smaller = more skipping.");
  if (ImGui::Checkbox("no PV skip", &noSkip)) {
    p.lambda = noSkip ? core::kNoPvSkipLambda : 50.0;
    changed = true;
  }
  if (changed) {
    try {
      s.setParams(p, ui.applyTarget);
    } catch (const std::exception& e) {
      s.pushError(e.what());
    }
  }

  ImGui::SameLine();
  ImGui::TextDisabled("|");
  ImGui::SameLine();
  bool smooth = cfg.smoothK;
  if (ImGui::Checkbox("smooth-k", &smooth)) s.setSmoothK(smooth);
  itemTooltip("Subtract the per-head K token mean before pooling (SpargeAttn default).");
  ImGui::SameLine();
  bool sink = cfg.sink;
  if (ImGui::Checkbox("sink", &sink)) s.setSink(sink);
  itemTooltip("Attention sink: K block 0 always on.");

  int geo = cfg.geometry == core::kGeometry64x128 ? 1 : 0;
  const char* geos[] = {"128x64 (sm80/sm89)", "64x128 (sm90)"};
  if (ImGui::Combo("tiles", &geo, geos, 2)) s.setGeometry(geo ? core::kGeometry64x128 : core::kGeometry128x64);
  itemTooltip("Tile geometry (query x key tokens) of the block mask.");

  int nOver = s.overrideCount();
  if (nOver > 0) {
    ImGui::Text("%d per-head override%s", nOver, nOver == 1 ? "" : "s");
    ImGui::SameLine();
    if (s.hasOverride(sel.head) && ImGui::SmallButton("clear this head")) s.clearOverride(sel.head);
    ImGui::SameLine();
    if (ImGui::SmallButton("clear all")) s.clearAllOverrides();
  }

  ImGui::Separator();
  ImGui::TextUnformatted("Error budget / auto-tune");
  Budget b = s.budget();
  float l1 = static_cast<float>(b.l1), l2 = static_cast<float>(b.l2);
  bool bChanged = ImGui::SliderFloat("l1", &l1, 0.001f, 0.3f, "L1 bound %.4f", ImGuiSliderFlags_Logarithmic);
  itemTooltip("Bound for theta and tau / top-k: L1 < l1 with PV skip off.");
  bChanged |= ImGui::SliderFloat("l2", &l2, 0.001f, 0.3f, "L1 bound %.4f", ImGuiSliderFlags_Logarithmic);
  itemTooltip("Bound for lambda: L1 < l2 with PV skip (must be > l1).");
  if (bChanged) {
    if (l2 <= l1) l2 = l1 * 1.15f;
    s.setBudget(Budget{l1, l2});
  }
  ImGui::PopItemWidth();
  bool follow = s.followBudget();
  if (ImGui::Checkbox("follow budget", &follow)) s.setFollowBudget(follow);
  itemTooltip("Re-tune the selected head live whenever l1 / l2 move (coalesced like every slider).");
  bool tuning = s.progress().active && s.worker().runningKey() == "tune";
  if (tuning) ImGui::BeginDisabled();
  ImGui::SameLine();
  if (ImGui::Button("Tune head")) s.autoTune(TuneScope::SelectedHead);
  itemTooltip("Ctrl+T: tune the selected head against the budget.");
  ImGui::SameLine();
  if (ImGui::Button("entry")) s.autoTune(TuneScope::Entry);
  itemTooltip("Ctrl+Shift+T: tune every head of this entry.");
  ImGui::SameLine();
  if (ImGui::Button("all")) s.autoTune(TuneScope::AllEntries);
  itemTooltip("Tune every entry of the capture (results applied when you open each entry).");
  if (tuning) ImGui::EndDisabled();

  const Progress& pr = s.progress();
  if (pr.active) {
    char overlay[96];
    std::snprintf(overlay, sizeof overlay, "%lld / %lld", (long long)pr.done, (long long)pr.total);
    ImGui::ProgressBar(static_cast<float>(pr.fraction), ImVec2(-ImGui::CalcTextSize("Cancel").x - 20, 0), overlay);
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) s.cancel();
    ImGui::TextDisabled("%s", pr.label.c_str());
  }

  if (!s.tuned().empty() &&
      ImGui::BeginTable("tuned", 6, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                                        ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerV)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("entry/head");
    ImGui::TableSetupColumn("\xce\xb8");
    ImGui::TableSetupColumn("\xcf\x84/k");
    ImGui::TableSetupColumn("\xce\xbb");
    ImGui::TableSetupColumn("sparsity");
    ImGui::TableSetupColumn("L1");
    ImGui::TableHeadersRow();
    for (const auto& row : s.tuned()) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text("%s/%lld", row.entry.c_str(), (long long)row.head);
      if (!row.decision.empty()) itemTooltip(row.decision.c_str());
      ImGui::TableNextColumn();
      if (!row.isSparse) {
        ImGui::TextDisabled("dense");
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
      } else {
        ImGui::Text("%.3f", row.params.theta);
        ImGui::TableNextColumn();
        ImGui::Text("%.3f", row.params.mode == core::SelectMode::TopK ? row.params.topk : row.params.tau);
        ImGui::TableNextColumn();
        if (row.params.lambda >= core::kNoPvSkipLambda * 0.5) {
          ImGui::TextDisabled("off");
        } else {
          ImGui::Text("%.3g", row.params.lambda);
        }
      }
      ImGui::TableNextColumn();
      ImGui::Text("%.1f%%", 100 * row.total);
      ImGui::TableNextColumn();
      ImGui::Text("%.4f", row.l1);
    }
    ImGui::EndTable();
  }
}

}  // namespace sparge::gui
