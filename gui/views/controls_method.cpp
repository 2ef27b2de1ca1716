// The Controls' block predictor (docs/methods.md): the method combo, and the method's own parameters as
// sliders in place of SpargeAttn's θ and τ / top-k (λ and "dense head" stay shared: Stage 2 is common).
#include <imgui.h>

#include <algorithm>
#include <string>

#include "controls_view.h"
#include "sparge/core/method_knob.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {

bool sliderCount(const char* label, int64_t& value, int lo, int hi, const char* fmt, bool logarithmic) {
  int v = static_cast<int>(std::clamp<int64_t>(value, lo, hi));
  if (!ImGui::SliderInt(label, &v, lo, hi, fmt, logarithmic ? ImGuiSliderFlags_Logarithmic : 0)) return false;
  value = v;
  return true;
}

bool sliderShare(const char* label, double& value, float lo, float hi, const char* fmt) {
  float v = static_cast<float>(value);
  if (!ImGui::SliderFloat(label, &v, lo, hi, fmt)) return false;
  value = v;
  return true;
}

bool drawXAttention(core::XAttentionParams& x, const core::Geometry& g) {
  bool changed = sliderShare("threshold", x.threshold, 0.0f, 1.0f, "\xcf\x84 %.4f");
  itemTooltip(
      "Per query block, blocks are kept (largest first) until they hold tau of the row's antidiagonal "
      "probability mass.");
  const int maxStride = std::min(g.blockQ, g.blockK);
  if (ImGui::BeginCombo("stride", ("S = " + std::to_string(x.stride)).c_str())) {
    for (int s = 1; s <= maxStride; s *= 2)
      if (ImGui::Selectable(("S = " + std::to_string(s)).c_str(), s == x.stride))
        x.stride = s, changed = true;
    ImGui::EndCombo();
  }
  itemTooltip("Antidiagonal stride: each S x S sub-tile is scored by its antidiagonal.");
  return changed;
}

bool drawMInference(core::MInferenceParams& m) {
  bool changed = false;
  const bool vs = m.pattern == core::MInferencePattern::VerticalSlash;
  if (ImGui::BeginCombo("pattern", core::toString(m.pattern))) {
    for (auto p : {core::MInferencePattern::VerticalSlash, core::MInferencePattern::BlockSparse})
      if (ImGui::Selectable(core::toString(p), p == m.pattern)) m.pattern = p, changed = true;
    ImGui::EndCombo();
  }
  itemTooltip(
      "vertical_slash: key columns and diagonals with the most attention from the last 64 queries; "
      "block_sparse: top key blocks per query block by pooled Q.K.");
  if (vs) {
    changed |= sliderCount("vertical", m.verticalSize, 30, 16384, "vertical_size %d", true);
    itemTooltip("Key columns kept (the first 30 always).");
    changed |= sliderCount("slash", m.slashSize, 50, 16384, "slash_size %d", true);
    itemTooltip("Diagonals kept (the 100 nearest the main one always).");
  } else {
    changed |= sliderCount("topk", m.topk, 1, 512, "topk %d", true);
    itemTooltip("Key blocks kept per query block.");
  }
  return changed;
}

bool drawFlexPrefill(core::FlexPrefillParams& f) {
  bool changed = sliderShare("gamma", f.gamma, 0.0f, 1.0f, "\xce\xb3 %.4f");
  itemTooltip(
      "Attention coverage of the kept vertical and slash blocks (or pooled blocks of query-aware "
      "heads).");
  changed |= sliderShare("tau", f.tau, 0.0f, 1.0f, "\xcf\x84 %.3f");
  itemTooltip(
      "A head is query-aware when its pooled and true block distributions are closer than tau "
      "(square-root Jensen-Shannon).");
  changed |= sliderCount("min budget", f.minBudget, 0, 16384, "%d tokens", true);
  changed |= sliderCount("max budget", f.maxBudget, 0, 131072, "%d tokens (0: none)", true);
  return changed;
}

}  // namespace

void ControlsView::drawMethod(Session& s) {
  core::RunConfig c = s.runs().config();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 8);
  if (ImGui::BeginCombo("block predictor", core::methodLabel(c.method))) {
    for (core::Method m : core::kAllMethods)
      if (ImGui::Selectable(core::methodLabel(m), m == c.method) && m != c.method) {
        c.method = m;
        s.runs().applyConfig(c);
      }
    ImGui::EndCombo();
  }
  itemTooltip(
      "Stage 1's block predictor. XAttention, MInference, FlexPrefill and the MoBA-style gate replace "
      "Stage 1 only; Stage 2, the PV skip, numerics and errors stay SpargeAttn's (docs/methods.md). "
      "Either engine. Auto-tune searches the method's knob.");
}

bool ControlsView::drawMethodParameters(Session& s, core::HeadParams& p) {
  const core::RunConfig& c = s.runs().config();
  switch (c.method) {
    case core::Method::XAttention:
      return drawXAttention(p.xattention, c.geometry);
    case core::Method::MInference:
      return drawMInference(p.minference);
    case core::Method::FlexPrefill:
      return drawFlexPrefill(p.flexprefill);
    case core::Method::Moba: {
      const bool changed = sliderCount("topk", p.moba.topk, 1, 256, "topk %d blocks", true);
      itemTooltip("Key blocks each query token keeps by q . mean(K block), its own block included.");
      return changed;
    }
    case core::Method::SpargeAttn:
      break;
  }
  return false;
}

}  // namespace sparge::gui
