#include "capture_browser.h"

#include <imgui.h>

#include <filesystem>

#include "widgets/ui_util.h"

namespace sparge::gui {

std::string maskText(const core::EntryInfo& e) {
  if (!e.window.bounded()) return e.causal ? "causal (top-left)" : "full (not causal)";
  auto side = [](int64_t v, char sign) {
    std::string s(1, sign);
    s += v >= 0 ? std::to_string(v) : std::string("all");
    return s;
  };
  std::string w = "window [" + std::to_string(e.window.left) + ", " + std::to_string(e.window.right) + "]";
  w += ": query i sees keys i" + side(e.window.left, '-') + " .. i" + side(e.window.right, '+');
  return e.causal ? w + " (causal)" : w;
}

std::string identityText(const core::EntryInfo& e) {
  std::string s;
  if (!e.module.empty()) s += "module " + e.module + "\n";
  if (!e.stack.empty() || !e.kind.empty())
    s += "kind " + e.stack + (e.stack.empty() ? "" : " ") + e.kind + "\n";
  return s;
}

namespace {
void entryTooltip(const core::EntryInfo& e) {
  ImGui::BeginTooltip();
  ImGui::Text("%s", e.name.c_str());
  ImGui::Separator();
  ImGui::Text("q [%lld, %lld, %lld, %lld]  k/v [%lld, %lld, %lld, %lld/%lld]", (long long)e.batch,
              (long long)e.headsQ, (long long)e.tokensQ, (long long)e.headDim, (long long)e.batch,
              (long long)e.headsKV, (long long)e.tokensKV, (long long)e.headDim, (long long)e.headDimV);
  ImGui::Text("dtype %s, stored layout %s", core::toString(e.dtype), core::toString(e.layout));
  ImGui::Text("mask: %s", maskText(e).c_str());
  std::string id = identityText(e);
  if (!id.empty()) ImGui::TextUnformatted(id.c_str(), id.c_str() + id.size() - 1);
  if (e.isGqa()) {
    ImGui::Text("GQA: %lld query heads per KV head", (long long)e.groupSize());
  } else {
    ImGui::Text("MHA (no GQA)");
  }
  ImGui::Text("scale %.5g%s", e.scale, e.scaleFromFile ? " (from file)" : " (1/sqrt(D))");
  ImGui::Text("on disk %s", formatBytes(e.bytesOnDisk()).c_str());
  ImGui::EndTooltip();
}
}  // namespace

void CaptureBrowser::drawRow(Session& s, const core::EntryInfo& e) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  if (ImGui::Selectable(e.name.c_str(), e.name == s.capture().entryName, ImGuiSelectableFlags_SpanAllColumns))
    s.selectEntry(e.name);
  if (ImGui::IsItemHovered()) entryTooltip(e);
  ImGui::TableNextColumn();
  if (e.layer || e.step) {
    ImGui::Text("%s/%s", e.layer ? std::to_string(*e.layer).c_str() : "-",
                e.step ? std::to_string(*e.step).c_str() : "-");
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
  // c = causal, w = a local window.
  ImGui::Text("%s%s%s", formatTokens(e.tokensQ).c_str(), e.causal ? " c" : "",
              e.window.bounded() ? " w" : "");
  ImGui::TableNextColumn();
  ImGui::Text("%lld", (long long)e.headDim);
  ImGui::TableNextColumn();
  ImGui::TextDisabled("%s", formatBytes(e.bytesOnDisk()).c_str());
}

void CaptureBrowser::draw(Session& s, UiState&) {
  std::string right = std::to_string(s.capture().entries.size()) + " entries";
  panelHeader("Capture", right.c_str());
  if (s.capture().path.empty()) {
    ImGui::TextWrapped("No capture open. File > Open (Ctrl+O), or drop an .h5 file on the window.");
    return;
  }
  ImGui::TextUnformatted(std::filesystem::path(s.capture().path).filename().string().c_str());
  itemTooltip(s.capture().path.c_str());
  if (!s.capture().rootAttributes.empty()) {
    ImGui::SameLine();
    ImGui::TextDisabled("(provenance)");
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      for (const auto& [k, v] : s.capture().rootAttributes) ImGui::Text("%s: %s", k.c_str(), v.c_str());
      ImGui::EndTooltip();
    }
  }
  ImGui::SameLine();
  const char* groups[] = {"capture order", "layer", "step", "module kind"};
  int g = static_cast<int>(group_);
  ImGui::SetNextItemWidth(ImGui::CalcTextSize("capture order").x + ImGui::GetFrameHeight() * 1.5f);
  if (ImGui::Combo("##group", &g, groups, 4)) group_ = static_cast<OverviewSort>(g);
  itemTooltip("Group the entries by layer, denoising step or module kind (stack and self / cross).");
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                          ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("entries", 6, flags, ImVec2(0, 0))) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  ImGui::TableSetupColumn("Entry", ImGuiTableColumnFlags_WidthStretch);
  for (const char* c : {"L/step", "Heads", "N", "D", "Size"}) ImGui::TableSetupColumn(c);
  ImGui::TableHeadersRow();
  const auto& entries = s.capture().entries;
  std::string lastGroup;
  for (size_t i : overviewOrder(entries, group_)) {
    std::string grp = groupOf(entries[i], group_);
    if (!grp.empty() && grp != lastGroup) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextColored(ImVec4(0.55f, 0.75f, 0.95f, 1), "%s", grp.c_str());
      lastGroup = grp;
    }
    drawRow(s, entries[i]);
  }
  ImGui::EndTable();
}

}  // namespace sparge::gui
