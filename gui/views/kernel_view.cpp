#include "kernel_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {
enum Col {
  kName,
  kStage,
  kGrid,
  kBlock,
  kRegs,
  kSmem,
  kLaunches,
  kMin,
  kMedian,
  kMax,
  kExecTf,
  kDenseTf,
  kCount
};

ImU32 stageColor(const std::string& stage) {
  if (stage == "predict") return IM_COL32(180, 140, 230, 255);
  if (stage == "sparse") return IM_COL32(72, 196, 150, 255);
  if (stage == "dense") return IM_COL32(232, 84, 84, 255);
  if (stage == "cudnn") return IM_COL32(250, 200, 60, 255);
  if (stage == "quantize") return IM_COL32(255, 128, 191, 255);
  if (stage == "reference") return IM_COL32(86, 156, 214, 255);
  if (stage == "metrics") return IM_COL32(236, 170, 60, 255);
  return IM_COL32(140, 146, 160, 255);
}

double key(const KernelRow& r, int col) {
  const prof::LaunchConfig& l = r.launch;
  switch (col) {
    case kGrid:
      return double(l.grid[0]) * l.grid[1] * l.grid[2];
    case kBlock:
      return double(l.block[0]) * l.block[1] * l.block[2];
    case kRegs:
      return l.registersPerThread;
    case kSmem:
      return double(l.staticSharedBytes) + l.dynamicSharedBytes;
    case kLaunches:
      return double(r.launches);
    case kMin:
      return r.minMs;
    case kMedian:
      return r.medianMs;
    case kMax:
      return r.maxMs;
    case kExecTf:
      return std::isfinite(r.executedTflops) ? r.executedTflops : -1;
    case kDenseTf:
      return std::isfinite(r.denseEquivalentTflops) ? r.denseEquivalentTflops : -1;
    default:
      return 0;
  }
}

// Grid, block, registers and shared memory; dashes where the clock recorded no launch configuration.
void drawLaunch(const prof::LaunchConfig& l) {
  ImGui::TableNextColumn();
  if (!l.known()) {
    for (int i = 0; i < 3; ++i) {
      ImGui::TextDisabled("-");
      ImGui::TableNextColumn();
    }
    ImGui::TextDisabled("-");
    return;
  }
  ImGui::TextUnformatted(l.gridLabel().c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(l.blockLabel().c_str());
  ImGui::TableNextColumn();
  ImGui::Text("%d", l.registersPerThread);
  ImGui::TableNextColumn();
  ImGui::Text("%.1f", (l.staticSharedBytes + l.dynamicSharedBytes) / 1024.0);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("%d bytes static + %d bytes dynamic", l.staticSharedBytes, l.dynamicSharedBytes);
}

void tflops(double v) {
  if (std::isfinite(v)) {
    ImGui::Text("%.1f", v);
  } else {
    ImGui::TextDisabled("-");
  }
}
}  // namespace

void KernelView::drawTable(const ProfileData& d) {
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_Sortable |
                          ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchProp |
                          ImGuiTableFlags_Resizable | ImGuiTableFlags_Hideable;
  float h = std::max(ImGui::GetContentRegionAvail().y - ImGui::GetTextLineHeightWithSpacing() * 4.5f,
                     ImGui::GetTextLineHeightWithSpacing() * 4);
  if (!ImGui::BeginTable("kernels", kCount, flags, ImVec2(0, h))) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  static const char* names[kCount] = {"kernel",   "stage",  "grid",      "block",  "regs",    "smem KiB",
                                      "launches", "min ms", "median ms", "max ms", "exec TF", "dense-eq TF"};
  for (int c = 0; c < kCount; ++c) {
    ImGui::TableSetupColumn(
        names[c],
        c == kMedian ? ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortDescending : 0,
        c == kName ? 3.0f : 1.0f, c);
  }
  ImGui::TableHeadersRow();
  order_.resize(d.kernels.size());
  std::iota(order_.begin(), order_.end(), size_t{0});
  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsCount > 0) {
    const ImGuiTableColumnSortSpecs& sp = specs->Specs[0];
    bool desc = sp.SortDirection == ImGuiSortDirection_Descending;
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
      const KernelRow &ra = d.kernels[a], &rb = d.kernels[b];
      if (sp.ColumnUserID == kName || sp.ColumnUserID == kStage) {
        const std::string& sa = sp.ColumnUserID == kName ? ra.name : ra.stage;
        const std::string& sb = sp.ColumnUserID == kName ? rb.name : rb.stage;
        return desc ? sa > sb : sa < sb;
      }
      return desc ? key(ra, sp.ColumnUserID) > key(rb, sp.ColumnUserID)
                  : key(ra, sp.ColumnUserID) < key(rb, sp.ColumnUserID);
    });
  }
  for (size_t i : order_) {
    const KernelRow& r = d.kernels[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(shortKernelName(r.name).c_str());
    if (ImGui::IsItemHovered()) {
      ImGui::SetTooltip("%s\n%lld launches (%.2f per run), clock %s", r.name.c_str(), (long long)r.launches,
                        r.launchesPerRun, r.source.c_str());
    }
    ImGui::TableNextColumn();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(stageColor(r.stage)), "%s", r.stage.c_str());
    drawLaunch(r.launch);
    ImGui::TableNextColumn();
    ImGui::Text("%lld", (long long)r.launches);
    for (double v : {r.minMs, r.medianMs, r.maxMs}) {
      ImGui::TableNextColumn();
      ImGui::Text("%.4f", v);
    }
    ImGui::TableNextColumn();
    tflops(r.executedTflops);
    ImGui::TableNextColumn();
    tflops(r.denseEquivalentTflops);
  }
  ImGui::EndTable();
}

void KernelView::drawTimeline(const ProfileData& d) {
  ImGui::TextDisabled("one run (%s):", d.timeline.empty()         ? "no records"
                                       : d.timeline.front().track ? "kernels on the GPU timeline"
                                                                  : "engine stages, laid end to end");
  if (d.timeline.empty()) return;
  double end = 0;
  int tracks = 1;
  for (const auto& b : d.timeline) {
    end = std::max(end, b.startMs + b.durMs);
    tracks = std::max(tracks, b.track + 1);
  }
  bool kernels = d.timeline.front().track > 0;
  int lanes = kernels ? tracks - 1 : 1;
  float laneH = ImGui::GetTextLineHeight() * 1.2f;
  ImVec2 p0 = ImGui::GetCursorScreenPos();
  float w = ImGui::GetContentRegionAvail().x;
  ImGui::InvisibleButton("timeline", ImVec2(w, laneH * lanes));
  bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + laneH * lanes), IM_COL32(24, 26, 32, 255));
  ImVec2 m = ImGui::GetIO().MousePos;
  const TimelineBar* hit = nullptr;
  for (const auto& b : d.timeline) {
    int lane = kernels ? b.track - 1 : 0;
    float x0 = p0.x + float(b.startMs / end) * w,
          x1 = std::max(x0 + 1.0f, p0.x + float((b.startMs + b.durMs) / end) * w);
    float y0 = p0.y + lane * laneH + 1, y1 = y0 + laneH - 2;
    dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), stageColor(b.stage));
    std::string label = shortKernelName(b.name);
    if (x1 - x0 > ImGui::CalcTextSize(label.c_str()).x + 4)
      dl->AddText(ImVec2(x0 + 2, y0), IM_COL32(20, 20, 24, 255), label.c_str());
    if (hovered && m.x >= x0 && m.x <= x1 && m.y >= y0 && m.y <= y1) hit = &b;
  }
  if (!hit) return;
  ImGui::BeginTooltip();
  ImGui::Text("%s", hit->name.c_str());
  ImGui::Text("%s: starts %.4f ms, takes %.4f ms", hit->stage.c_str(), hit->startMs, hit->durMs);
  for (const auto& [k, v] : hit->details) {
    if (k != "mangled") ImGui::TextDisabled("%s: %s", k.c_str(), v.c_str());
  }
  ImGui::EndTooltip();
}

void KernelView::draw(Session& s, UiState& ui) {
  auto d = s.profiling().last();
  std::string right = d ? "clock: " + d->summary.clock : std::string();
  panelHeader("Kernels", right.c_str());
  if (!d) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled(
        "Profile the current settings (Ctrl+P, or the Timings view) to list every kernel of the runs "
        "and lay one run out on a timeline.");
    ImGui::PopTextWrapPos();
    ImGui::BeginDisabled(!s.capture().info() || s.runningJob() == JobKind::Profile);
    if (ImGui::Button("Profile")) s.profiling().profile(ui.profileRuns, ui.profileWarmupMs);
    ImGui::EndDisabled();
    return;
  }
  ImGui::TextWrapped("%s  |  %s  |  %s", d->summary.device.c_str(), d->summary.clockDetail.c_str(),
                     d->summary.numerics.c_str());
  if (d->kernels.empty()) {
    ImGui::PushTextWrapPos(0);
    ImGui::TextDisabled("No kernel records: %s",
                        d->summary.note.empty() ? "the CPU engine runs no kernels" : d->summary.note.c_str());
    ImGui::PopTextWrapPos();
  } else {
    drawTable(*d);
  }
  drawTimeline(*d);
}

}  // namespace sparge::gui
