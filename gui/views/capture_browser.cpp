#include "capture_browser.h"

#include <imgui.h>

#include <filesystem>

#include "widgets/ui_util.h"

namespace sparge::gui {

void CaptureBrowser::draw(Session& s, UiState&) {
  std::string right = std::to_string(s.entries().size()) + " entries";
  panelHeader("Capture", right.c_str());
  if (s.capturePath().empty()) {
    ImGui::TextWrapped("No capture open. File > Open (Ctrl+O), or drop an .h5 file on the window.");
    return;
  }
  std::string file = std::filesystem::path(s.capturePath()).filename().string();
  ImGui::TextUnformatted(file.c_str());
  itemTooltip(s.capturePath().c_str());
  if (!s.rootAttributes().empty()) {
    ImGui::SameLine();
    ImGui::TextDisabled("(provenance)");
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      for (const auto& [k, v] : s.rootAttributes()) ImGui::Text("%s: %s", k.c_str(), v.c_str());
      ImGui::EndTooltip();
    }
  }
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                          ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Resizable;
  if (ImGui::BeginTable("entries", 6, flags, ImVec2(0, 0))) {
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("Entry", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("L/step");
    ImGui::TableSetupColumn("Heads");
    ImGui::TableSetupColumn("N");
    ImGui::TableSetupColumn("D");
    ImGui::TableSetupColumn("Size");
    ImGui::TableHeadersRow();
    for (const auto& e : s.entries()) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      bool selected = e.name == s.entryName();
      if (ImGui::Selectable(e.name.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns)) s.selectEntry(e.name);
      if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::Text("%s", e.name.c_str());
        ImGui::Separator();
        ImGui::Text("q [%lld, %lld, %lld, %lld]  k/v [%lld, %lld, %lld, %lld/%lld]", (long long)e.batch,
                    (long long)e.headsQ, (long long)e.tokensQ, (long long)e.headDim, (long long)e.batch,
                    (long long)e.headsKV, (long long)e.tokensKV, (long long)e.headDim, (long long)e.headDimV);
        ImGui::Text("dtype %s, stored layout %s", core::toString(e.dtype), core::toString(e.layout));
        ImGui::Text("causal: %s", e.causal ? "yes (top-left)" : "no");
        if (e.isGqa()) {
          ImGui::Text("GQA: %lld query heads per KV head", (long long)e.groupSize());
        } else {
          ImGui::Text("MHA (no GQA)");
        }
        ImGui::Text("scale %.5g%s", e.scale, e.scaleFromFile ? " (from file)" : " (1/sqrt(D))");
        ImGui::Text("on disk %s", formatBytes(e.bytesOnDisk()).c_str());
        ImGui::EndTooltip();
      }
      ImGui::TableNextColumn();
      if (e.layer || e.step) {
        ImGui::Text("%s/%s", e.layer ? std::to_string(*e.layer).c_str() : "-", e.step ? std::to_string(*e.step).c_str() : "-");
      } else {
        ImGui::TextDisabled("-");
      }
      ImGui::TableNextColumn();
      if (e.isGqa()) {
        ImGui::Text("%lld/%lld", (long long)e.headsQ, (long long)e.headsKV);
      } else {
        ImGui::Text("%lld", (long long)e.headsQ);
      }
      ImGui::TableNextColumn();
      ImGui::Text("%s%s", formatTokens(e.tokensQ).c_str(), e.causal ? " c" : "");
      ImGui::TableNextColumn();
      ImGui::Text("%lld", (long long)e.headDim);
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", formatBytes(e.bytesOnDisk()).c_str());
    }
    ImGui::EndTable();
  }
}

}  // namespace sparge::gui
