#include "controls_view.h"

#include <imgui.h>

#include <cmath>
#include <cstdio>

#include "sparge/core/dense_hint.h"
#include "sparge/core/method_knob.h"
#include "sparge/core/tuner.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {
constexpr core::Target kTargets[] = {core::Target::Sm80, core::Target::Sm89, core::Target::Sm90};

// The target whose tiles and numerics the configuration uses; -1 when it matches none.
int targetIndex(const core::RunConfig& c) {
  const std::optional<core::Target> t = core::targetOf(c.geometry, c.numerics);
  for (int i = 0; i < 3; ++i) {
    if (t == kTargets[i]) return i;
  }
  return -1;
}

bool lambdaOff(const core::HeadParams& p) {
  return p.lambda >= core::kNoPvSkipLambda * 0.5;
}
}  // namespace

// Tuned values are per-head overrides: show them on the sliders (the selected head's), and let the next
// slider move refine that head instead of resetting every head to the defaults.
void ControlsView::followTunedHead(Session& s, UiState& ui) {
  std::string loaded = s.capture().info() ? s.capture().info()->name : std::string();
  if (s.tuning().generation() == seenTuneGeneration_ && loaded == seenEntry_) return;
  seenTuneGeneration_ = s.tuning().generation();
  seenEntry_ = loaded;
  if (s.runs().hasOverride(s.capture().selected.head)) ui.applyTarget = ApplyTarget::SelectedHead;
}

void ControlsView::drawApplyTarget(Session& s, UiState& ui) {
  ImGui::TextUnformatted("Apply to");
  ImGui::SameLine();
  int target = static_cast<int>(ui.applyTarget);
  char selLabel[48];
  std::snprintf(selLabel, sizeof selLabel, "head %lld", (long long)s.capture().selected.head);
  ImGui::RadioButton(selLabel, &target, static_cast<int>(ApplyTarget::SelectedHead));
  itemTooltip("Changes become a per-head override of the selected head (marked * in the grid and table).");
  ImGui::SameLine();
  ImGui::RadioButton("all heads", &target, static_cast<int>(ApplyTarget::AllHeads));
  itemTooltip("Changes set the defaults of every head and clear per-head overrides.");
  ui.applyTarget = static_cast<ApplyTarget>(target);
}

// SpargeAttn's θ, top-k mode and τ / top-k; true when one moved.
bool ControlsView::drawSpargeParameters(core::HeadParams& p) {
  bool changed = false;
  float theta = static_cast<float>(p.theta);
  if (ImGui::SliderFloat("\xce\xb8", &theta, -1.0f, 1.0f, "simthreshd1 %.3f"))
    p.theta = theta, changed = true;
  itemTooltip("Blocks whose self-similarity s <= theta are forced on (whole row / column). -1: none forced.");
  bool topk = p.mode == core::SelectMode::TopK;
  if (ImGui::Checkbox("top-k mode", &topk)) {
    p.mode = topk ? core::SelectMode::TopK : core::SelectMode::Cdf;
    changed = true;
  }
  ImGui::SameLine();
  changed |= ImGui::Checkbox("dense head", &p.dense);
  itemTooltip("is_sparse = false: every valid block computed, no PV skip.");
  if (topk) {
    float k = static_cast<float>(p.topk);
    if (ImGui::SliderFloat("top-k", &k, 0.01f, 1.0f, "fraction %.3f")) p.topk = k, changed = true;
    itemTooltip("Fraction of all K blocks kept per row, by pooled probability.");
  } else {
    float tau = static_cast<float>(p.tau);
    if (ImGui::SliderFloat("\xcf\x84", &tau, 0.0f, 1.0f, "cdfthreshd %.4f")) p.tau = tau, changed = true;
    itemTooltip("Keep the most probable blocks of a row while their cumulative pooled probability <= tau.");
  }
  return changed;
}

void ControlsView::drawParameters(Session& s, UiState& ui) {
  const HeadRef sel = s.capture().selected;
  core::HeadParams p =
      ui.applyTarget == ApplyTarget::SelectedHead ? s.runs().paramsFor(sel.head) : s.runs().config().defaults;
  bool changed = false;
  if (s.runs().config().method == core::Method::SpargeAttn) {
    changed = drawSpargeParameters(p);
  } else {
    changed = drawMethodParameters(s, p);
    changed |= ImGui::Checkbox("dense head", &p.dense);
    itemTooltip("is_sparse = false: every valid block computed, no PV skip.");
  }
  bool noSkip = lambdaOff(p);
  float lambda = noSkip ? 100.0f : static_cast<float>(p.lambda);
  ImGui::BeginDisabled(noSkip);
  if (ImGui::SliderFloat("\xce\xbb", &lambda, 0.0f, 100.0f, "pvthreshd %.1f"))
    p.lambda = lambda, changed = true;
  ImGui::EndDisabled();
  itemTooltip(
      "Skip a block's PV product when the row max rises by less than -lambda (base 2). Smaller = more "
      "skipping.");
  if (ImGui::Checkbox("no PV skip", &noSkip)) {
    p.lambda = noSkip ? core::kNoPvSkipLambda : 50.0;
    changed = true;
  }
  if (!changed) return;
  try {
    s.runs().setParams(p, ui.applyTarget);
  } catch (const std::exception& e) {
    s.messages().pushError(e.what());
  }
}

void ControlsView::drawPresets(Session& s) {
  ImGui::TextDisabled("presets");
  struct Button {
    core::Preset preset;
    const char* label;
  };
  for (Button b : {Button{core::Preset::CdfDefaults, "CDF"}, Button{core::Preset::TopkDefaults, "top-k"},
                   Button{core::Preset::FilterOff, "filter off"}, Button{core::Preset::Tuned, "tuned"}}) {
    ImGui::SameLine();
    ImGui::BeginDisabled(!s.presetAvailable(b.preset));
    if (ImGui::SmallButton(b.label)) s.applyPreset(b.preset);
    ImGui::EndDisabled();
    std::string tip = std::string(core::toString(b.preset)) + ": " +
                      (b.preset == core::Preset::Tuned ? "this entry's tuned or loaded per-head values"
                                                       : core::presetOptions(b.preset));
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) ImGui::SetTooltip("%s", tip.c_str());
  }
}

void ControlsView::drawRunSettings(Session& s) {
  core::RunConfig c = s.runs().config();
  bool changed = false;
  changed |= ImGui::Checkbox("smooth-k", &c.smoothK);
  itemTooltip("Subtract the per-head K token mean before pooling (SpargeAttn default).");
  ImGui::SameLine();
  changed |= ImGui::Checkbox("sink", &c.sink);
  itemTooltip("Attention sink: K block 0 always on.");
  ImGui::SameLine();
  changed |= ImGui::Checkbox("diagonal", &c.diagonal);
  itemTooltip(
      "Not SpargeAttn's (an extension): the diagonal blocks, those holding key == query, always on, so no "
      "causal row loses its local keys.");

  int target = targetIndex(c);
  const char* targets[] = {"sm80 (128x64, int8-fp16)", "sm89 (128x64, int8-fp8)", "sm90 (64x128, int8-fp8)"};
  if (ImGui::Combo("target", &target, targets, 3)) {
    c.setTarget(kTargets[target]);
    changed = true;
  }
  itemTooltip(
      "Tiles and numerics as SpargeAttn uses them on that GPU family. Tiles and numerics below override.");
  int numerics = static_cast<int>(c.numerics);
  const char* numericsNames[] = {"none (exact)", "int8-fp16", "int8-fp8"};
  ImGui::SetNextItemWidth(ImGui::CalcItemWidth() * 0.5f - ImGui::GetStyle().ItemSpacing.x);
  if (ImGui::Combo("##numerics", &numerics, numericsNames, 3)) {
    c.numerics = static_cast<core::Numerics>(numerics);
    changed = true;
  }
  itemTooltip(
      "Stage-2 arithmetic: exact, INT8 Q.K with fp16 P.V (sm80), or INT8 Q.K with FP8 e4m3 P.V (sm89/sm90).");
  ImGui::SameLine();
  int geo = c.geometry == core::kGeometry64x128 ? 1 : 0;
  const char* geos[] = {"128x64 tiles", "64x128 tiles"};
  ImGui::SetNextItemWidth(ImGui::CalcItemWidth() * 0.5f);
  if (ImGui::Combo("tiles", &geo, geos, 2)) {
    c.geometry = geo ? core::kGeometry64x128 : core::kGeometry128x64;
    changed = true;
  }
  itemTooltip("Tile geometry (query x key tokens) of the block mask.");
  if (changed) s.runs().applyConfig(c);
}

void ControlsView::drawOverrides(Session& s) {
  int nOver = s.runs().overrideCount();
  if (nOver == 0) return;
  int64_t head = s.capture().selected.head;
  ImGui::Text("%d per-head override%s", nOver, nOver == 1 ? "" : "s");
  ImGui::SameLine();
  if (s.runs().hasOverride(head) && ImGui::SmallButton("clear this head")) s.runs().clearOverride(head);
  ImGui::SameLine();
  if (ImGui::SmallButton("clear all")) s.runs().clearAllOverrides();
}

void ControlsView::drawBudget(Session& s) {
  ImGui::TextUnformatted("Error budget / auto-tune");
  Budget b = s.tuning().budget();
  float l1 = static_cast<float>(b.l1), l2 = static_cast<float>(b.l2);
  bool changed = ImGui::SliderFloat("l1", &l1, 0.001f, 0.3f, "L1 bound %.4f", ImGuiSliderFlags_Logarithmic);
  itemTooltip("Bound for theta and tau / top-k: deployed L1 < l1 with PV skip off.");
  changed |= ImGui::SliderFloat("l2", &l2, 0.001f, 0.3f, "L1 bound %.4f", ImGuiSliderFlags_Logarithmic);
  itemTooltip("Bound for lambda: deployed L1 < l2 with PV skip (must be > l1).");
  if (changed) s.tuning().setBudget(Budget{l1, l2 <= l1 ? l1 * 1.15f : l2});
}

void ControlsView::drawTuning(Session& s) {
  bool follow = s.tuning().followBudget();
  if (ImGui::Checkbox("follow budget", &follow)) s.tuning().setFollowBudget(follow);
  itemTooltip("Re-tune the selected head live whenever l1 / l2 move (coalesced like every slider).");
  bool tuning = s.progress().active && s.runningJob() == JobKind::Tune;
  ImGui::BeginDisabled(tuning);
  ImGui::SameLine();
  if (ImGui::Button("Tune head")) s.tuning().autoTune(TuneScope::SelectedHead);
  itemTooltip("Ctrl+T: tune the selected head against the budget.");
  ImGui::SameLine();
  if (ImGui::Button("entry")) s.tuning().autoTune(TuneScope::Entry);
  itemTooltip("Ctrl+Shift+T: tune every head of this entry.");
  ImGui::SameLine();
  if (ImGui::Button("all")) s.tuning().autoTune(TuneScope::AllEntries);
  itemTooltip("Tune every entry of the capture (results applied when you open each entry).");
  ImGui::EndDisabled();
  const Progress& pr = s.progress();
  if (!pr.active) return;
  char overlay[96];
  std::snprintf(overlay, sizeof overlay, "%lld / %lld", (long long)pr.done, (long long)pr.total);
  ImGui::ProgressBar(static_cast<float>(pr.fraction), ImVec2(-ImGui::CalcTextSize("Cancel").x - 20, 0),
                     overlay);
  ImGui::SameLine();
  if (ImGui::Button("Cancel")) s.cancel();
  ImGui::TextDisabled("%s", pr.label.c_str());
}

void ControlsView::drawTunedTable(Session& s) {
  const auto& rows = s.tuning().rows();
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                          ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerV;
  if (rows.empty() || !ImGui::BeginTable("tuned", 6, flags)) return;
  const core::Method method = s.runs().config().method;  // tuned values land on the current method
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* h : {"entry/head", "\xce\xb8", "\xcf\x84/k", "\xce\xbb", "sparsity", "L1"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  for (const auto& row : rows) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%s/%lld", row.entry.c_str(), (long long)row.head);
    if (!row.decision.empty()) itemTooltip(row.decision.c_str());
    ImGui::TableNextColumn();
    if (!row.isSparse) {
      ImGui::TextDisabled("dense");
      ImGui::TableNextColumn();
      ImGui::TableNextColumn();
    } else if (method != core::Method::SpargeAttn) {
      ImGui::TextUnformatted(core::describeMethodParams(method, row.params).c_str());
      ImGui::TableNextColumn();
      ImGui::TableNextColumn();
      ImGui::Text("%.3g", row.params.lambda);
    } else {
      ImGui::Text("%.3f", row.params.theta);
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", row.params.mode == core::SelectMode::TopK ? row.params.topk : row.params.tau);
      ImGui::TableNextColumn();
      if (lambdaOff(row.params)) {
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

void ControlsView::draw(Session& s, UiState& ui) {
  panelHeader("Controls", "changes re-run in the background");
  followTunedHead(s, ui);
  drawApplyTarget(s, ui);
  float w = ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("target 0").x;
  ImGui::PushItemWidth(std::max(60.0f, w));
  drawMethod(s);
  drawParameters(s, ui);
  drawPresets(s);
  drawRunSettings(s);
  drawTokenOrder(s, ui);
  drawOverrides(s);
  ImGui::Separator();
  drawBudget(s);
  ImGui::PopItemWidth();
  drawTuning(s);
  drawTunedTable(s);
}

}  // namespace sparge::gui
