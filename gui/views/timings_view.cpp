#include "timings_view.h"

#include <imgui.h>

#include <cstdio>

#include "widgets/bar_chart.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

void TimingsView::draw(Session& s, UiState& ui) {
  const TimingSummary& t = s.profiling().timing();
  const core::StageTimes& last = s.runs().lastRun().times;
  std::string right = std::string("clock: ") + (t.valid ? t.clock : last.clock);
  panelHeader("Timings", right.c_str());
  ImGui::Text("%s", s.engine().name.c_str());
  if (!s.engine().gpu) {
    ImGui::SameLine();
    ImGui::TextDisabled("(CPU engine: host wall-clock times)");
  }

  // The last interactive re-run (one sample).
  if (s.runs().result()) {
    ImGui::Text("last re-run: %lld heads, %.1f ms wall", (long long)s.runs().lastRun().heads,
                s.runs().lastRun().wallMs);
    ImGui::PushTextWrapPos(0);
    // The CPU engine computes the reference inside its sparse pass: no time of its own to show.
    char reference[48];
    if (last.referenceCached || last.referenceInSparse)
      std::snprintf(reference, sizeof reference, "%s",
                    last.referenceCached ? "cached" : "in the sparse pass");
    else
      std::snprintf(reference, sizeof reference, "%.2f ms", last.referenceMs);
    ImGui::TextDisabled("predict %.2f  sparse %.2f  metrics %.2f ms  (reference: %s)", last.predictMs,
                        last.sparseMs, last.metricsMs, reference);
    ImGui::PopTextWrapPos();
  }
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
  ImGui::SliderInt("##runs", &ui.profileRuns, 1, 20, "%d runs");
  ImGui::SameLine();
  bool disabled = !s.capture().info() || s.runningJob() == JobKind::Profile;
  if (disabled) ImGui::BeginDisabled();
  if (ImGui::Button("Profile (Ctrl+P)")) s.profiling().profile(ui.profileRuns, ui.profileWarmupMs);
  if (disabled) ImGui::EndDisabled();
  itemTooltip(
      "Runs the current configuration N times (after an untimed run that fills the caches and a warm-up "
      "round), each next to the same entry with every head dense and cuDNN's dense attention where "
      "available, and reports min / median / max per stage.");
  drawWarmupSlider(ui);
  if (!t.valid) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled("Press Profile for min / median / max over repeated runs and the dense baseline.");
    ImGui::PopTextWrapPos();
    return;
  }
  ImGui::Separator();
  std::vector<RangeBar> bars;
  for (const auto& st : t.stages) {
    ImU32 col = st.stage.rfind("predict", 0) == 0  ? IM_COL32(180, 140, 230, 255)
                : st.stage.rfind("sparse", 0) == 0 ? IM_COL32(72, 196, 150, 255)
                : st.stage.rfind("dense", 0) == 0  ? IM_COL32(232, 84, 84, 255)
                : st.stage.rfind("cudnn", 0) == 0  ? IM_COL32(236, 170, 60, 255)
                : st.stage.rfind("total", 0) == 0  ? IM_COL32(120, 130, 150, 255)
                                                   : IM_COL32(86, 156, 214, 255);
    bars.push_back(RangeBar{st.stage, st.minMs, st.medianMs, st.maxMs, col});
  }
  drawRangeBars("stages", bars, "ms");
  ImGui::Separator();
  drawFigures(t);
}

void TimingsView::drawWarmupSlider(UiState& ui) {
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12);
  ImGui::SliderInt("##warmup", &ui.profileWarmupMs, 0, kWarmupSliderMs,
                   ui.profileWarmupMs > 0 ? "warm-up %d ms" : "warm-up: one round");
  itemTooltip(
      "Warm-up rounds before the profiled runs go on until this long has passed. A GPU fresh from idle "
      "runs its first milliseconds at a higher clock than under sustained load: 200 ms or more gives the "
      "sustained figures `sparge bench` reports. Ratios compare like with like either way, since each "
      "round runs sparse, dense and cuDNN in turn.");
}

void TimingsView::drawFigures(const TimingSummary& t) {
  if (!ImGui::BeginTable("derived", 2, ImGuiTableFlags_SizingStretchProp)) return;
  ImGui::TableSetupColumn("what", ImGuiTableColumnFlags_WidthFixed);
  ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch);
  auto row = [](const char* k, const char* v, const char* tip) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("%s", k);
    if (tip) itemTooltip(tip);
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%s", v);
  };
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.3f ms (median of %d; %s)", t.sparseMs, t.runs, t.numerics.c_str());
  row("sparse call", buf, "prediction + quantization + attention, as deployed");
  if (t.warmupMs > 0)
    std::snprintf(buf, sizeof buf, "%d runs, for %d ms or more", t.warmupRuns, t.warmupMs);
  else
    std::snprintf(buf, sizeof buf, "%d runs (one round)", t.warmupRuns);
  row("warm-up", buf,
      "runs before the profiled ones, left out of every figure: the first (with the error metrics), then "
      "whole rounds of sparse, dense and cuDNN");
  if (t.denseMs > 0) {
    std::snprintf(buf, sizeof buf, "%.3f ms", t.denseMs);
    row("dense (ours)", buf,
        "the same entry with every head dense (all valid blocks, no PV skip), same kernels");
  }
  if (t.cudnnMs > 0) {
    std::snprintf(buf, sizeof buf, "%.3f ms", t.cudnnMs);
    row("dense (cuDNN)", buf, "cuDNN's fused attention on the same entry");
  }
  if (t.speedup > 0) {
    std::snprintf(buf, sizeof buf, "%.2fx over %s", t.speedup, t.speedupBaseline.c_str());
    row("speed-up", buf, "over the fastest dense attention measured");
  }
  std::snprintf(buf, sizeof buf, "%.3f", t.denseTops);
  row("dense-equivalent TOPS", buf, "4*B*H*Nq*Nkv*D / t (halved for causal), t = the sparse call");
  std::snprintf(buf, sizeof buf, "%.3f", t.executedTops);
  row("executed TOPS", buf, "only the computed blocks' QK and PV work / t");
  row("device", t.device.c_str(), nullptr);
  row("clock", t.clockDetail.c_str(), nullptr);
  if (!t.note.empty()) row("note", t.note.c_str(), nullptr);
  for (const auto& n : t.notes) row("note", n.c_str(), nullptr);
  ImGui::EndTable();
}

}  // namespace sparge::gui
