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
  const std::optional<core::Target> t = core::targetOf(c.geometry, c.numerics);
  return t ? s + " (" + core::toString(*t) + ")" : s;
}

// `text` shortened with "..." to at most `width` pixels.
std::string fitText(const std::string& text, float width) {
  if (ImGui::CalcTextSize(text.c_str()).x <= width) return text;
  size_t lo = 0, hi = text.size();
  while (lo < hi) {  // the longest prefix that fits with the ellipsis
    size_t mid = (lo + hi + 1) / 2;
    if (ImGui::CalcTextSize((text.substr(0, mid) + "...").c_str()).x <= width) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  while (lo > 0 && (static_cast<unsigned char>(text[lo]) & 0xC0) == 0x80)
    --lo;  // not inside a UTF-8 character
  return text.substr(0, lo) + "...";
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

// The dense-run hint: why the run is nearly all dense (or quantization alone breaks the budget), shortened
// to leave room for the button that applies the preset which shows sparsity.
void drawDenseHint(const core::DenseHint& hint, Session& s) {
  separator();
  std::string label = hint.preset ? std::string("Apply: ") + core::toString(*hint.preset) : std::string();
  float buttonW =
      label.empty() ? 0 : ImGui::CalcTextSize(label.c_str()).x + ImGui::GetStyle().FramePadding.x * 4;
  std::string text = (hint.quantization ? "Quantization breaks the budget: " : "Nearly all dense: ") +
                     hint.why + "." +
                     (hint.quantization && !hint.fix.empty() ? " Fix: " + hint.fix + "." : "");
  // The sentence gives way to the button: shortened to fit, whole in its tooltip.
  float room = ImGui::GetWindowWidth() - ImGui::GetCursorPosX() - buttonW - ImGui::GetFontSize();
  std::string shown = fitText(text, room);
  ImGui::TextColored(ImVec4(0.93f, 0.67f, 0.24f, 1), "%s", shown.c_str());
  if (shown != text) itemTooltip(text.c_str());
  if (!label.empty()) {
    ImGui::SameLine();
    if (ImGui::SmallButton(label.c_str())) s.applyPreset(*hint.preset);
  }
}

// The latest notice, or else the latest warning, at the end of the line.
void drawLatestNotice(const Session& s) {
  const auto& notices = s.messages().notices();
  const auto& warnings = s.messages().warnings();
  std::string tail = !notices.empty() ? notices.back() : (!warnings.empty() ? warnings.back() : "");
  if (!tail.empty()) {
    // Right-aligned after what the line already shows, shortened (full text on hover) where it would not
    // fit.
    const float start = ImGui::GetItemRectMax().x - ImGui::GetWindowPos().x + 20;
    const float room = ImGui::GetWindowWidth() - 12 - start;
    const std::string shown = fitText(tail, std::max(room, 0.0f));
    ImGui::SameLine(std::max(start, ImGui::GetWindowWidth() - 12 - ImGui::CalcTextSize(shown.c_str()).x));
    ImGui::TextDisabled("%s", shown.c_str());
    if (shown != tail) itemTooltip(tail.c_str());
  }
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
  // With loaded parameters their budget is known: quantization that alone breaks it is the first cause.
  if (hintGeneration_ != session_.runs().resultGeneration() ||
      hintChecks_ != session_.checks().generation()) {
    hintGeneration_ = session_.runs().resultGeneration();
    hintChecks_ = session_.checks().generation();
    hint_ = r ? core::denseRunHint(std::span<const core::EntryResult>(r.get(), 1), session_.checks().budget())
              : std::nullopt;
  }
  if (hint_) {
    drawDenseHint(*hint_, session_);
  } else {
    drawLatestNotice(session_);
  }
  ImGui::End();
  ImGui::PopStyleColor();
  ImGui::PopStyleVar();
}

}  // namespace sparge::gui
