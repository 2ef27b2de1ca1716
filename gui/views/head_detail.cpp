#include "head_detail.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "capture_order.h"
#include "sparge/core/parallel.h"
#include "sparge/core/stage1.h"
#include "views/capture_browser.h"
#include "widgets/colorbar.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

namespace {
constexpr HeadLayer kLayers[4] = {HeadLayer::Mask, HeadLayer::PvSkipped, HeadLayer::DroppedMass,
                                  HeadLayer::PooledProb};

// A strip of per-q-block values beside a panel, aligned with its visible rows.
void rowStrip(const char* id, const HeatmapHover& ref, const std::vector<float>& values, float width,
              ImU32 color, const char* what, int hoverRow) {
  ImVec2 start = ImGui::GetCursorScreenPos();
  float h = ref.p1.y - ref.p0.y;
  ImGui::InvisibleButton(id, ImVec2(width, std::max(1.0f, ref.p1.y - start.y)));
  if (values.empty() || h <= 0) return;
  float top = 0;
  for (float v : values) {
    if (std::isfinite(v)) top = std::max(top, v);
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 a(start.x, ref.p0.y), b(start.x + width, ref.p1.y);
  dl->AddRectFilled(a, b, IM_COL32(30, 33, 40, 255));
  dl->PushClipRect(a, b, true);
  int n = static_cast<int>(values.size());
  float span = ref.uv1.y - ref.uv0.y;
  for (int i = 0; i < n; ++i) {
    float y0 = ref.p0.y + ((float(i) / n) - ref.uv0.y) / span * h;
    float y1 = ref.p0.y + ((float(i + 1) / n) - ref.uv0.y) / span * h;
    if (y1 < a.y || y0 > b.y) continue;
    float v = std::isfinite(values[i]) ? values[i] : 0;
    float len = top > 0 ? v / top * width : 0;
    dl->AddRectFilled(ImVec2(a.x, y0 + (y1 - y0 > 3 ? 0.5f : 0)), ImVec2(a.x + len, y1),
                      i == hoverRow ? IM_COL32(255, 255, 255, 255) : color);
  }
  dl->PopClipRect();
  dl->AddRect(a, b, IM_COL32(90, 96, 110, 255));
  ImGuiIO& io = ImGui::GetIO();
  if (ImGui::IsItemHovered() && io.MousePos.y >= a.y && io.MousePos.y < b.y) {
    int i = std::clamp(int((ref.uv0.y + (io.MousePos.y - a.y) / h * span) * n), 0, n - 1);
    ImGui::SetTooltip("q-block %d\n%s %.5f\n(max %.5f)", i, what, values[i], top);
  }
}

// The header's right side: the head's parameters, whether they are an override, and the token order.
std::string paramsSummary(const Session& s, const UiState& ui, const core::EntryResult& r,
                          const core::HeadResult& h) {
  char right[200] = "";
  bool topk = h.params.mode == core::SelectMode::TopK;
  const core::Permutation order = r.info.permutation;
  const std::string walked = order == core::Permutation::None ? std::string()
                             : ui.captureOrder
                                 ? std::string("  ") + core::toString(order) + " run, capture order"
                                 : std::string("  tokens in ") + core::toString(order) + " order";
  std::snprintf(right, sizeof right, "%s\xce\xb8 %.3f  %s %.3f  \xce\xbb %g%s%s",
                h.params.dense ? "DENSE  " : "", h.params.theta, topk ? "top-k" : "\xcf\x84",
                topk ? h.params.topk : h.params.tau, h.params.lambda,
                s.runs().hasOverride(h.head) ? "  (override)" : "", walked.c_str());
  return right;
}

// The legend of the mask cells, or in the capture's order what the cells show instead.
void drawLegend(bool mapped, core::Permutation order) {
  static const MaskCell legend[] = {MaskCell::Selected, MaskCell::ForcedRow, MaskCell::ForcedCol,
                                    MaskCell::Sink,     MaskCell::Diagonal,  MaskCell::PvSkipped,
                                    MaskCell::Off,      MaskCell::Invalid};
  if (mapped)
    ImGui::TextWrapped(
        "In the capture's token order: a block of the %s order is not a block of the capture, so each cell "
        "(the same tiling) shows the fraction of its token pairs that lie in selected / PV-computed blocks, "
        "or the mean over its pairs, counted token by token.",
        core::toString(order));
  else
    drawMaskLegend(legend, int(std::size(legend)));
}

// The per-q-block strip beside panel row `row`, aligned with its rows: L1 (row 0) or dropped mass (row 1).
void drawQBlockStrip(int row, const HeatmapHover& ref, const core::HeadResult& h, float width, int hoverRow) {
  ImGui::TextUnformatted(row == 0 ? "L1/q" : "drop/q");
  ImGui::SetCursorScreenPos(ImVec2(ImGui::GetCursorScreenPos().x, ref.p0.y));
  if (row == 0) {
    rowStrip("##l1strip", ref, h.qBlockL1, width, IM_COL32(232, 120, 84, 255), "L1 of this q-block",
             hoverRow);
  } else {
    std::vector<float> dropped(h.nq);
    for (int i = 0; i < h.nq; ++i) dropped[i] = static_cast<float>(droppedMassOfRow(h, i));
    rowStrip("##dropstrip", ref, dropped, width, IM_COL32(236, 170, 60, 255), "attention mass dropped",
             hoverRow);
  }
}
}  // namespace

void HeadDetail::sync(const core::HeadResult& h, uint64_t generation, const core::EntryResult& r,
                      const core::TokenPermutation* captureOrder) {
  HeadRef ref{h.batch, h.head};
  const bool mapped = captureOrder != nullptr;
  if (generation == syncedGeneration_ && ref == syncedHead_ && mapped == syncedCaptureOrder_) return;
  syncedCaptureOrder_ = mapped;
  if (!(ref == syncedHead_) && (h.nq != tex_[0].rows() || h.nk != tex_[0].cols())) zoom_.reset();
  syncedGeneration_ = generation;
  syncedHead_ = ref;
  // The layers are coloured on several threads; GL uploads stay on this one.
  core::parallelFor(kPanels, colouringThreads(int64_t(kPanels) * h.nq * h.nk), [&](int64_t k) {
    if (mapped)
      renderHeadLayerInCaptureOrder(h, kLayers[k], r.info, r.config.geometry, *captureOrder, scratch_[k],
                                    &vmin_[k], &vmax_[k]);
    else
      renderHeadLayer(h, kLayers[k], scratch_[k], &vmin_[k], &vmax_[k]);
  });
  for (int k = 0; k < kPanels; ++k) {
    // Versions only need to differ between uploads; the generation, head and order identify the data.
    tex_[k].update((generation << 20) ^ (static_cast<uint64_t>(h.batch) << 12) ^
                       static_cast<uint64_t>(h.head) ^ (mapped ? uint64_t(1) << 11 : 0),
                   scratch_[k].data(), h.nk, h.nq);
  }
}

void HeadDetail::tooltip(const Session& s, const core::HeadResult& h, int i, int j) const {
  const core::EntryInfo* info = s.capture().info();
  auto r = s.runs().result();
  const core::Geometry g = r ? r->config.geometry : core::Geometry{};
  size_t idx = static_cast<size_t>(i) * h.nk + j;
  int64_t nQ = r ? r->info.tokensQ : (info ? info->tokensQ : 0);
  int64_t nKv = r ? r->info.tokensKV : (info ? info->tokensKV : 0);
  uint8_t reasons = idx < h.reasons.size() ? h.reasons[idx] : 0;
  bool on = idx < h.blockMask.size() && h.blockMask[idx];
  bool skipped = idx < h.pvSkipped.size() && h.pvSkipped[idx];
  ImGui::BeginTooltip();
  ImGui::Text("block (%d, %d)   [%s tiles]", i, j, g.label().c_str());
  ImGui::TextDisabled("queries %lld..%lld   keys %lld..%lld", (long long)(int64_t(i) * g.blockQ),
                      (long long)(std::min<int64_t>(int64_t(i + 1) * g.blockQ, nQ) - 1),
                      (long long)(int64_t(j) * g.blockK),
                      (long long)(std::min<int64_t>(int64_t(j + 1) * g.blockK, nKv) - 1));
  ImGui::Separator();
  MaskCell cell = classifyBlock(h, idx);
  // Too-dark category colours (off / no valid pair) would vanish on the tooltip background.
  ImVec4 col = cell == MaskCell::Invalid || cell == MaskCell::Off
                   ? ImVec4(0.7f, 0.72f, 0.78f, 1)
                   : ImGui::ColorConvertU32ToFloat4(maskCellColor(cell));
  if (on) {
    ImGui::TextColored(col, "ON (QK\xe1\xb5\x80 computed)");
    if (reasons & core::kReasonDenseHead) ImGui::BulletText("dense head (is_sparse = false)");
    if (reasons & core::kReasonSelected) {
      ImGui::BulletText(h.params.mode == core::SelectMode::TopK
                            ? "top-k selection of its row (top-k %.3f)"
                            : "top-CDF selection of its row (cdf <= \xcf\x84 = %.3f)",
                        h.params.mode == core::SelectMode::TopK ? h.params.topk : h.params.tau);
    }
    if (reasons & core::kReasonForcedRow)
      ImGui::BulletText("forced: Q block %d not self-similar (s <= \xce\xb8)", i);
    if (reasons & core::kReasonForcedCol)
      ImGui::BulletText("forced: K block %d not self-similar (s <= \xce\xb8)", j);
    if (reasons & core::kReasonSink) ImGui::BulletText("attention sink (K block 0)");
    if (reasons & core::kReasonDiagonal)
      ImGui::BulletText("diagonal block (holds key == query; an extension)");
    ImGui::Text("PV: %s", skipped ? "SKIPPED (row max rose by less than -\xce\xbb)" : "computed");
  } else if (reasons & core::kReasonCausalOff) {
    // Stage 1 marks exactly the blocks that core's validity rule (causal and window) leaves without a pair.
    std::string mask = r ? maskText(r->info) : info ? maskText(*info) : std::string("?");
    ImGui::TextColored(col, "OFF: no valid (query, key) pair (%s)", mask.c_str());
  } else {
    ImGui::TextColored(col, "OFF: not selected (below the %s cut)",
                       h.params.mode == core::SelectMode::TopK ? "top-k" : "CDF");
  }
  ImGui::Separator();
  if (idx < h.pooledProb.size()) {
    // NaN where no block of the row enters the pooled softmax (every valid column is forced on).
    if (std::isfinite(h.pooledProb[idx]))
      ImGui::Text("pooled probability P\xcc\x82  %.3e", h.pooledProb[idx]);
    else
      ImGui::TextDisabled("pooled probability P\xcc\x82  - (no block of this row enters the softmax)");
  }
  if (idx < h.refBlockMass.size()) {
    float m = h.refBlockMass[idx];
    ImGui::Text("reference attention mass  %.3e", m);
    // A block without a valid pair drops nothing: only blocks the method turned off count.
    if ((!on || skipped) && !(reasons & core::kReasonCausalOff)) {
      ImGui::TextColored(ImVec4(0.95f, 0.6f, 0.3f, 1), "error contribution: drops %.3e of each row's mass",
                         m);
    }
  }
  if (i < static_cast<int>(h.selfSimQ.size())) {
    ImGui::Text("Q block self-similarity s = %.4f  %s", h.selfSimQ[i],
                i < static_cast<int>(h.similarQ.size()) && h.similarQ[i] ? "(similar)" : "(not similar)");
  }
  if (j < static_cast<int>(h.selfSimK.size())) {
    ImGui::Text("K block self-similarity s = %.4f  %s", h.selfSimK[j],
                j < static_cast<int>(h.similarK.size()) && h.similarK[j] ? "(similar)" : "(not similar)");
  }
  if (i < static_cast<int>(h.qBlockL1.size())) ImGui::Text("L1 of q-block %d: %.5f", i, h.qBlockL1[i]);
  ImGui::Text("dropped mass of q-block %d: %.4f", i, droppedMassOfRow(h, i));
  ImGui::TextDisabled("wheel: zoom, drag: pan, double-click: reset");
  ImGui::EndTooltip();
}

void HeadDetail::drawHeadline(const Session& s, const core::HeadResult& h) const {
  auto figure = [](const std::string& text) {
    separatorIfFits(ImGui::CalcTextSize(text.c_str()).x);
    ImGui::TextUnformatted(text.c_str());
  };
  char buf[96];
  ImGui::Text("stage-1 %.1f %%", 100 * h.sparsity.stage1());
  std::snprintf(buf, sizeof buf, "PV skip %.1f %%", 100 * h.sparsity.pvSkipRate());
  figure(buf);
  std::snprintf(buf, sizeof buf, "total %.1f %%", 100 * h.sparsity.total());
  figure(buf);
  // The deployed L1 and its parts stay together; they move to the next line as one when they do not fit.
  std::snprintf(buf, sizeof buf, "L1 %.5f", h.error.l1());
  // An early result shows its deployed figures while the exact pass behind the sparsity part runs.
  const bool pending = s.runs().result()->splitPending && h.errorSparse.count == 0;
  const std::string parts = "(sparsity " + (pending ? std::string("...") : l1Text(h.errorSparse)) +
                            ", quantization " + l1Text(h.errorQuant) + ")";
  separatorIfFits(ImGui::CalcTextSize(buf).x + ImGui::GetStyle().ItemSpacing.x +
                  ImGui::CalcTextSize(parts.c_str()).x);
  bool over = overBudget(h, s.tuning().budget());
  ImGui::TextColored(over ? ImVec4(0.95f, 0.4f, 0.4f, 1) : ImVec4(0.85f, 0.87f, 0.9f, 1), "%s", buf);
  const char* numerics = core::toString(s.runs().result()->config.numerics);
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "deployed L1 (sparse, %s): %.5f, cos %.6f\n"
        "sparsity alone (same mask and lambda, exact): %s, cos %s\n"
        "quantization alone (every valid block, %s): %s, cos %s\n(- : not measured; ... : being computed)",
        numerics, h.error.l1(), h.error.cosSim(), l1Text(h.errorSparse, 5).c_str(),
        cosText(h.errorSparse).c_str(), numerics, l1Text(h.errorQuant, 5).c_str(),
        cosText(h.errorQuant).c_str());
  }
  ImGui::SameLine();
  ImGui::TextDisabled("%s", parts.c_str());
  std::snprintf(buf, sizeof buf, "cos %.6f", h.error.cosSim());
  figure(buf);
  std::snprintf(buf, sizeof buf, "%lld/%lld blocks, %d x %d grid", (long long)h.sparsity.selectedBlocks,
                (long long)h.sparsity.validBlocks, h.nq, h.nk);
  separatorIfFits(ImGui::CalcTextSize(buf).x);
  ImGui::TextDisabled("%s", buf);
}

void HeadDetail::draw(Session& s, UiState& ui) {
  auto r = s.runs().result();
  HeadRef sel = s.capture().selected;
  const core::HeadResult* h = r ? r->find(sel.batch, sel.head) : nullptr;
  const std::string right = h ? paramsSummary(s, ui, *r, *h) : std::string();
  char title[96];
  std::snprintf(title, sizeof title, "Head detail: batch %lld, head %lld", (long long)sel.batch,
                (long long)sel.head);
  panelHeader(title, right.c_str());
  if (!h) {
    ImGui::TextDisabled(s.busy() ? "Running..." : "No result for this head yet.");
    return;
  }
  // A permuted run's maps in the capture's order (the toggle in the Controls); its permutation is cached
  // per run.
  const bool mapped = ui.captureOrder && r->info.permutation != core::Permutation::None;
  if (mapped && capturePermOf_ != r) {
    capturePerm_ = core::appliedPermutation(r->info);
    capturePermOf_ = r;
  }
  sync(*h, s.runs().mapsGeneration(), *r, mapped ? &capturePerm_ : nullptr);

  drawHeadline(s, *h);
  if (zoom_.zoom > 1.001f) {
    ImGui::SameLine();
    if (ImGui::SmallButton("reset zoom")) zoom_.reset();
  }

  drawLegend(mapped, r->info.permutation);
  drawPanels(s, *h, *r, mapped);
}

// The four panels in two rows, each row with its per-q-block strip, sharing zoom, pan and hover.
void HeadDetail::drawPanels(const Session& s, const core::HeadResult& h, const core::EntryResult& r,
                            bool mapped) {
  ImVec2 avail = ImGui::GetContentRegionAvail();
  avail.y -= 2;
  const ImGuiStyle& style = ImGui::GetStyle();
  float line = ImGui::GetTextLineHeightWithSpacing();
  float stripW = std::max(36.0f, ImGui::GetFontSize() * 3.0f);
  float colW = (avail.x - stripW - style.ItemSpacing.x * 2) * 0.5f;
  float rowH = (avail.y - style.ItemSpacing.y) * 0.5f;
  float imgH = rowH - line * 2.4f;
  float aspect = r.info.tokensQ > 0 ? float(r.info.tokensKV) / float(r.info.tokensQ) : 1.0f;

  int newHoverRow = -1, newHoverCol = -1;
  HeatmapHover rowRef[2];
  for (int row = 0; row < 2; ++row) {
    ImVec2 rowStart = ImGui::GetCursorPos();
    for (int c = 0; c < 2; ++c) {
      int k = row * 2 + c;
      ImGui::SetCursorPos(ImVec2(rowStart.x + c * (colW + style.ItemSpacing.x), rowStart.y));
      ImGui::BeginGroup();
      if (mapped)
        ImGui::Text("%s, capture order", headLayerLabel(kLayers[k]));
      else
        ImGui::TextUnformatted(headLayerLabel(kLayers[k]));
      char id[16];
      std::snprintf(id, sizeof id, "##panel%d", k);
      HeatmapHover hv =
          drawHeatmap(id, tex_[k], ImVec2(colW, std::max(8.0f, imgH)), aspect, zoom_, hoverRow_, hoverCol_);
      if (c == 1) rowRef[row] = hv;
      if (hv.hovered) {
        newHoverRow = hv.row;
        newHoverCol = hv.col;
        tooltip(s, h, hv.row, hv.col);
      }
      if (mapped) {
        drawColorbar(kLayers[k] == HeadLayer::DroppedMass ? Colormap::Inferno : Colormap::Viridis, vmin_[k],
                     vmax_[k], std::min(colW, ImGui::GetFontSize() * 22), k < 2 ? "of pairs" : nullptr,
                     false);
      } else if (headLayerIsContinuous(kLayers[k])) {
        drawColorbar(kLayers[k] == HeadLayer::DroppedMass ? Colormap::Inferno : Colormap::Viridis, vmin_[k],
                     vmax_[k], std::min(colW, ImGui::GetFontSize() * 22));
      }
      ImGui::EndGroup();
    }
    // Per-q-block strip, aligned with the rows of the panels to its left.
    ImGui::SetCursorPos(ImVec2(rowStart.x + 2 * (colW + style.ItemSpacing.x), rowStart.y));
    ImGui::BeginGroup();
    drawQBlockStrip(row, rowRef[row], h, stripW - 4, hoverRow_);
    ImGui::EndGroup();
    if (row == 0) ImGui::SetCursorPos(ImVec2(rowStart.x, rowStart.y + rowH + style.ItemSpacing.y));
  }
  hoverRow_ = newHoverRow;
  hoverCol_ = newHoverCol;
}

}  // namespace sparge::gui
