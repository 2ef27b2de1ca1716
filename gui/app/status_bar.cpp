// The status line: engine, activity, the numerics and tiles behind the numbers shown, the dense-run hint
// with the preset that shows sparsity, memory and the latest notice.
#include <imgui.h>

#include "app/app.h"
#include "sparge/core/dense_hint.h"
#include "sysinfo.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {
void separator() {
  ImGui::SameLine();
  ImGui::TextDisabled("|");
  ImGui::SameLine();
}

// "int8-fp8, 128x64 (sm89)": which numerics and tiles produced the figures on screen.
std::string settingsOf(const core::RunConfig& c) {
  std::string s = std::string(core::toString(c.numerics)) + ", " + c.geometry.label();
  for (core::Target t : {core::Target::Sm80, core::Target::Sm89, core::Target::Sm90}) {
    if (core::geometryOf(t) == c.geometry && core::numericsOf(t) == c.numerics)
      return s + " (" + core::toString(t) + ")";
  }
  return s;
}

void drawActivity(const Session& s) {
  std::string act = s.activity();
  if (act.empty()) {
    ImGui::TextDisabled("idle");
    return;
  }
  static const char spin[] = "|/-\\";
  int k = static_cast<int>(ImGui::GetTime() * 8) % 4;
  ImGui::TextColored(ImVec4(0.93f, 0.67f, 0.24f, 1), "%c %s", spin[k], act.c_str());
}
}  // namespace

void App::drawStatusBar(float height) {
  ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x, vp->WorkPos.y + vp->WorkSize.y - height));
  ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x, height));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8, 2));
  ImGui::PushStyleColor(ImGuiCol_WindowBg, ImVec4(0.13f, 0.14f, 0.17f, 1));
  ImGui::Begin("##status", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoFocusOnAppearing);
  ImGui::AlignTextToFramePadding();
  const EngineStatus& engine = session_.engine();
  ImVec4 engineCol = engine.gpu ? ImVec4(0.46f, 0.85f, 0.45f, 1) : ImVec4(0.55f, 0.75f, 0.95f, 1);
  ImGui::TextColored(engineCol, "%s %s", engine.gpu ? "GPU" : "CPU", engine.name.c_str());
  if (!engine.message.empty()) itemTooltip(engine.message.c_str());
  separator();
  drawActivity(session_);
  separator();
  auto r = session_.runs().result();
  if (r) {
    ImGui::Text("%s", settingsOf(r->config).c_str());
    itemTooltip("Numerics and tile geometry of the results shown (the target GPU family in brackets).");
    separator();
    ImGui::Text("last re-run %.1f ms (%lld heads)", session_.runs().lastRun().wallMs,
                (long long)session_.runs().lastRun().heads);
  } else {
    ImGui::TextDisabled("no run yet");
  }
  separator();
  ImGui::Text("RSS %s", formatBytes(processRssBytes()).c_str());
  if (engine.gpuTotal > 0) {
    ImGui::SameLine();
    ImGui::Text("  GPU %s / %s", formatBytes(engine.gpuUsed).c_str(), formatBytes(engine.gpuTotal).c_str());
  }
  if (!automation_) {
    ImGui::SameLine();
    ImGui::TextDisabled("|  %.1f fps", ImGui::GetIO().Framerate);
  }
  if (hintGeneration_ != session_.runs().resultGeneration()) {
    hintGeneration_ = session_.runs().resultGeneration();
    hint_ = r ? core::denseRunHint(std::span<const core::EntryResult>(r.get(), 1)) : std::nullopt;
  }
  const std::optional<core::DenseHint>& hint = hint_;
  if (hint) {
    separator();
    ImGui::TextColored(ImVec4(0.93f, 0.67f, 0.24f, 1), "Nearly all dense: %s.", hint->why.c_str());
    if (hint->preset) {
      ImGui::SameLine();
      std::string label = std::string("Apply: ") + core::toString(*hint->preset);
      if (ImGui::SmallButton(label.c_str())) session_.applyPreset(*hint->preset);
    }
  } else {
    const auto& notices = session_.messages().notices();
    const auto& warnings = session_.messages().warnings();
    std::string tail = !notices.empty() ? notices.back() : (!warnings.empty() ? warnings.back() : "");
    if (!tail.empty()) {
      float w = ImGui::CalcTextSize(tail.c_str()).x;
      float x = ImGui::GetWindowWidth() - w - 12;
      ImGui::SameLine(std::max(x, ImGui::GetCursorPosX() + 20));
      ImGui::TextDisabled("%s", tail.c_str());
    }
  }
  ImGui::End();
  ImGui::PopStyleColor();
  ImGui::PopStyleVar();
}

}  // namespace sparge::gui
