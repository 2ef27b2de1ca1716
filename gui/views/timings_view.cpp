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
    ImGui::TextDisabled("predict %.2f  sparse %.2f  reference %.2f%s  metrics %.2f ms", last.predictMs,
                        last.sparseMs, last.referenceMs, last.referenceCached ? " (cached)" : "",
                        last.metricsMs);
    ImGui::PopTextWrapPos();
  }
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
  ImGui::SliderInt("##runs", &ui.profileRuns, 1, 20, "%d runs");
  ImGui::SameLine();
  bool disabled = !s.capture().info() || s.runningJob() == JobKind::Profile;
  if (disabled) ImGui::BeginDisabled();
  if (ImGui::Button("Profile (Ctrl+P)")) s.profiling().profile(ui.profileRuns);
  if (disabled) ImGui::EndDisabled();
  itemTooltip(
      "Runs the current configuration N times (after an untimed run that fills the caches and a warm-up "
      "round), each next to the same entry with every head dense and cuDNN's dense attention where "
      "available, "
      "and reports min / median / max per stage.");
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

void TimingsView::drawFigures(const TimingSummary& t) {
  if (!ImGui::BeginTable("derived", 2, ImGuiTableFlags_SizingFixedFit)) return;
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
