#include "head_grid.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "heat_colors.h"
#include "sparge/core/parallel.h"
#include "widgets/colorbar.h"
#include "widgets/ui_util.h"

namespace sparge::gui {

uint64_t headContentHash(const core::HeadResult& h) {
  constexpr uint64_t kPrime = 1099511628211ull;
  uint64_t x = 1469598103934665603ull;
  // Eight bytes per step: every head is hashed after every run, and a 32K entry has 131072 blocks a head.
  auto mix = [&](const std::vector<uint8_t>& v) {
    size_t i = 0;
    for (; i + 8 <= v.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, v.data() + i, 8);
      x = (x ^ w) * kPrime;
      x ^= x >> 29;
    }
    for (; i < v.size(); ++i) x = (x ^ v[i]) * kPrime;
  };
  x = (x ^ static_cast<uint64_t>(h.nq)) * kPrime;
  x = (x ^ static_cast<uint64_t>(h.nk)) * kPrime;
  mix(h.blockMask);
  mix(h.pvSkipped);
  mix(h.reasons);
  return x;
}

void HeadGrid::syncTextures(const core::EntryResult& r, uint64_t generation) {
  if (generation == syncedGeneration_) return;
  syncedGeneration_ = generation;
  // Hashing and colouring run on several threads (heads are independent); GL uploads stay on this one.
  const size_t n = r.heads.size();
  std::vector<HeatmapTexture*> tex(n);
  std::vector<uint64_t> known(n);
  for (size_t i = 0; i < n; ++i) {
    auto key = std::make_pair(r.heads[i].batch, r.heads[i].head);
    tex[i] = &textures_[key];
    auto it = hashes_.find(key);
    known[i] = it != hashes_.end() && tex[i]->valid() ? it->second : 0;
  }
  scratch_.resize(n);
  int64_t blocks = 0;
  for (const core::HeadResult& h : r.heads) blocks += int64_t(h.nq) * h.nk;
  core::parallelFor(static_cast<int64_t>(n), colouringThreads(blocks), [&](int64_t i) {
    Thumbnail& t = scratch_[i];
    t.hash = headContentHash(r.heads[i]);
    t.stale = t.hash != known[i] || !tex[i]->valid();
    if (t.stale) renderHeadThumbnail(r.heads[i], kThumbnailTexels, t.rgba, &t.cols, &t.rows);
  });
  for (size_t i = 0; i < n; ++i) {
    const Thumbnail& t = scratch_[i];
    if (!t.stale) continue;
    tex[i]->update(t.hash, t.rgba.data(), t.cols, t.rows);
    hashes_[{r.heads[i].batch, r.heads[i].head}] = t.hash;
  }
}

namespace {
void headTooltip(const Session& s, const core::HeadResult& h, bool over, const HeadMarks& marks) {
  const Budget& budget = s.tuning().budget();
  ImGui::BeginTooltip();
  ImGui::Text("batch %lld, head %lld%s", (long long)h.batch, (long long)h.head,
              s.runs().hasOverride(h.head) ? "  (per-head override)" : "");
  ImGui::Separator();
  ImGui::Text("stage-1 sparsity  %6.2f %%", 100 * h.sparsity.stage1());
  ImGui::Text("PV-skip rate      %6.2f %%", 100 * h.sparsity.pvSkipRate());
  ImGui::Text("total sparsity    %6.2f %%", 100 * h.sparsity.total());
  ImGui::Text("L1 %.5f   cos %.6f  (deployed)", h.error.l1(), h.error.cosSim());
  ImGui::Text("L1 %s sparsity alone, %s quantization alone", l1Text(h.errorSparse, 5).c_str(),
              l1Text(h.errorQuant, 5).c_str());
  if (over)
    ImGui::TextColored(ImVec4(0.9f, 0.35f, 0.35f, 1), "over budget (l1 %.3g / l2 %.3g)", budget.l1,
                       budget.l2);
  if (marks.any()) {
    ImGui::Separator();
    headMarkLines(marks.lines, marks.exact);
  }
  ImGui::TextDisabled("click to select");
  ImGui::EndTooltip();
}
}  // namespace

void HeadGrid::drawToolbar(UiState& ui) {
  ImGui::SetNextItemWidth(ImGui::CalcTextSize("sparsity____").x + ImGui::GetFrameHeight());
  const char* sorts[] = {"index", "sparsity", "error (L1)"};
  int sort = static_cast<int>(ui.gridSort);
  if (ImGui::Combo("sort", &sort, sorts, 3)) ui.gridSort = static_cast<HeadSort>(sort);
  ImGui::SameLine();
  ImGui::Checkbox("descending", &ui.gridDescending);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
  ImGui::SliderFloat("size", &ui.thumbSize, 40.0f, 240.0f, "%.0f px");
  ImGui::SameLine();
  static const MaskCell legend[] = {MaskCell::Selected, MaskCell::ForcedRow, MaskCell::ForcedCol,
                                    MaskCell::Sink,     MaskCell::Diagonal,  MaskCell::PvSkipped,
                                    MaskCell::Off,      MaskCell::Invalid};
  ImGui::TextDisabled("(legend)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40);
    drawMaskLegend(legend, int(std::size(legend)));
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

namespace {
// What the loaded files say about a head of `r`, with the exact numerics of the run itself (the run's
// configuration is what ran; the file may not be the one applied).
HeadMarks marksOf(const Session& s, const core::EntryResult& r, int64_t head) {
  HeadMarks m = s.checks().marks(r.info.name, r.info.layer, head);
  const bool exactRun =
      r.config.numerics != core::Numerics::None && r.config.numericsFor(head) == core::Numerics::None;
  if (exactRun && !m.exact) {
    m.exact = true;
    m.lines.insert(m.lines.begin(), "exact numerics (the loaded parameters run this head exact)");
  }
  return m;
}
}  // namespace

void HeadGrid::drawCell(Session& s, const core::EntryResult& r, const core::HeadResult& h, size_t index,
                        ImVec2 p, ImVec2 thumb, float cellW, float labelH, bool multiBatch) {
  const ImGuiStyle& style = ImGui::GetStyle();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float tw = thumb.x, th = thumb.y;
  ImGui::SetCursorScreenPos(p);
  ImGui::PushID(static_cast<int>(index));
  ImVec2 imgPos(p.x + (cellW - style.ItemSpacing.x - tw) * 0.5f, p.y);
  if (ImGui::InvisibleButton("thumb", ImVec2(cellW - style.ItemSpacing.x, th + labelH))) {
    s.selectHead(HeadRef{h.batch, h.head});
  }
  bool hovered = ImGui::IsItemHovered();
  auto it = textures_.find({h.batch, h.head});
  if (it != textures_.end() && it->second.valid()) {
    dl->AddImage(it->second.id(), imgPos, ImVec2(imgPos.x + tw, imgPos.y + th));
  }
  HeadRef sel = s.capture().selected;
  bool isSel = sel.batch == h.batch && sel.head == h.head;
  bool over = overBudget(h, s.tuning().budget());
  const HeadMarks marks = marksOf(s, r, h.head);
  ImU32 frame = isSel                 ? IM_COL32(255, 255, 255, 255)
                : over || marks.bad() ? colors::kBad
                : hovered             ? colors::kAccent
                                      : IM_COL32(70, 76, 90, 255);
  dl->AddRect(ImVec2(imgPos.x - 2, imgPos.y - 2), ImVec2(imgPos.x + tw + 2, imgPos.y + th + 2), frame, 0, 0,
              isSel ? 2.5f : 1.0f);
  drawHeadMarks(dl, imgPos, ImVec2(imgPos.x + tw, imgPos.y + th), marks.exact, marks.bad());
  char l1[64], l2[64];
  const char* mark = s.runs().hasOverride(h.head) ? "*" : "";
  if (multiBatch) {
    std::snprintf(l1, sizeof l1, "b%lld h%lld%s", (long long)h.batch, (long long)h.head, mark);
  } else {
    std::snprintf(l1, sizeof l1, "h%lld%s", (long long)h.head, mark);
  }
  std::snprintf(l2, sizeof l2, "%.1f%%  %.3f", 100 * h.sparsity.total(), h.error.l1());
  float ty = imgPos.y + th + 3;
  // An exact head's label in the exact colour: the corner alone is small on small thumbnails.
  const ImU32 labelColor = marks.exact ? colors::kExact
                           : isSel     ? IM_COL32(255, 255, 255, 255)
                                       : IM_COL32(200, 204, 212, 255);
  dl->AddText(ImVec2(p.x, ty), labelColor, l1);
  float l1w = ImGui::CalcTextSize(l1).x;
  dl->AddText(ImVec2(p.x + l1w + 6, ty), over || marks.bad() ? colors::kBad : IM_COL32(150, 156, 168, 255),
              l2);
  if (hovered) headTooltip(s, h, over, marks);
  ImGui::PopID();
}

void HeadGrid::draw(Session& s, UiState& ui) {
  auto r = s.runs().result();
  char right[128] = "";
  if (r) {
    std::snprintf(right, sizeof right, "%s  %zu heads  %s  total sparsity %.1f %%  L1 %.4f",
                  r->info.name.c_str(), r->heads.size(), r->config.geometry.label().c_str(),
                  100 * r->sparsity.total(), r->error.l1());
  }
  panelHeader("Head grid", right);
  drawToolbar(ui);
  if (!r) {
    ImGui::TextDisabled(s.busy() ? "Running..." : "No results yet.");
    return;
  }
  syncTextures(*r, s.runs().mapsGeneration());

  std::vector<size_t> order = sortHeads(*r, ui.gridSort, ui.gridDescending);
  ImGui::BeginChild("thumbs", ImVec2(0, 0), false);
  const ImGuiStyle& style = ImGui::GetStyle();
  float thumb = ui.thumbSize;
  float aspect = r->info.tokensKV > 0 ? float(r->info.tokensKV) / float(r->info.tokensQ) : 1.0f;
  float tw = aspect >= 1 ? thumb : thumb * aspect;
  float th = aspect >= 1 ? thumb / aspect : thumb;
  float labelH = ImGui::GetTextLineHeight() * 1.3f;
  bool multiBatchLabel = r->info.batch > 1;
  float cellW =
      std::max(tw, ImGui::CalcTextSize(multiBatchLabel ? "b0 h00* 100.0%  0.000" : "h00* 100.0%  0.000").x) +
      style.ItemSpacing.x * 2;
  float cellH = th + labelH + style.ItemSpacing.y + 4;
  int perRow =
      std::max(1, static_cast<int>((ImGui::GetContentRegionAvail().x + style.ItemSpacing.x) / cellW));
  int rows = static_cast<int>((order.size() + perRow - 1) / perRow);
  bool multiBatch = r->info.batch > 1;

  // Only visible rows are submitted: with hundreds of heads the grid stays cheap.
  ImGuiListClipper clipper;
  clipper.Begin(rows, cellH);
  while (clipper.Step()) {
    for (int row = clipper.DisplayStart; row < clipper.DisplayEnd; ++row) {
      ImVec2 rowStart = ImGui::GetCursorScreenPos();
      for (int c = 0; c < perRow; ++c) {
        size_t k = static_cast<size_t>(row) * perRow + c;
        if (k >= order.size()) break;
        drawCell(s, *r, r->heads[order[k]], order[k], ImVec2(rowStart.x + c * cellW, rowStart.y),
                 ImVec2(tw, th), cellW, labelH, multiBatch);
      }
      ImGui::SetCursorScreenPos(ImVec2(rowStart.x, rowStart.y + cellH - style.ItemSpacing.y));
      ImGui::Dummy(ImVec2(0, 0));
    }
  }
  clipper.End();
  ImGui::EndChild();
}

}  // namespace sparge::gui
