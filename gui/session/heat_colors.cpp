#include "heat_colors.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace sparge::gui {

namespace {
struct Rgb {
  float r, g, b;
};
// Nine samples of each map; linear interpolation between them is visually indistinguishable at our sizes.
constexpr Rgb kViridis[9] = {{68, 1, 84},    {71, 44, 122}, {59, 81, 139},  {44, 113, 142}, {33, 144, 141},
                             {39, 173, 129}, {92, 200, 99}, {170, 220, 50}, {253, 231, 37}};
constexpr Rgb kInferno[9] = {{0, 0, 4},     {31, 12, 72},   {85, 15, 109},  {136, 34, 106}, {186, 54, 85},
                             {227, 89, 51}, {249, 140, 10}, {249, 201, 50}, {252, 255, 164}};
}  // namespace

uint32_t colormap(Colormap map, float t) {
  const Rgb* table = map == Colormap::Viridis ? kViridis : kInferno;
  if (!(t >= 0)) t = 0;  // NaN too
  if (t > 1) t = 1;
  float x = t * 8.0f;
  int i = std::min(7, static_cast<int>(x));
  float f = x - static_cast<float>(i);
  const Rgb& a = table[i];
  const Rgb& b = table[i + 1];
  return packRgba(static_cast<uint8_t>(a.r + (b.r - a.r) * f + 0.5f),
                  static_cast<uint8_t>(a.g + (b.g - a.g) * f + 0.5f),
                  static_cast<uint8_t>(a.b + (b.b - a.b) * f + 0.5f));
}

MaskCell classifyBlock(const core::HeadResult& h, size_t i) {
  uint8_t r = i < h.reasons.size() ? h.reasons[i] : 0;
  bool on = i < h.blockMask.size() && h.blockMask[i];
  if (!on) return (r & core::kReasonCausalOff) ? MaskCell::Invalid : MaskCell::Off;
  if (i < h.pvSkipped.size() && h.pvSkipped[i]) return MaskCell::PvSkipped;
  if (r & core::kReasonDenseHead) return MaskCell::Dense;
  if (r & core::kReasonSelected) return MaskCell::Selected;
  if (r & core::kReasonSink) return MaskCell::Sink;
  if (r & core::kReasonForcedRow) return MaskCell::ForcedRow;
  if (r & core::kReasonForcedCol) return MaskCell::ForcedCol;
  if (r & core::kReasonDiagonal) return MaskCell::Diagonal;
  return MaskCell::Selected;
}

uint32_t maskCellColor(MaskCell c) {
  switch (c) {
    case MaskCell::Invalid:
      return packRgba(14, 15, 18);
    case MaskCell::Off:
      return packRgba(40, 44, 54);
    case MaskCell::Selected:
      return packRgba(72, 196, 150);
    case MaskCell::ForcedRow:
      return packRgba(236, 170, 60);
    case MaskCell::ForcedCol:
      return packRgba(214, 214, 90);
    case MaskCell::Sink:
      return packRgba(180, 140, 230);
    case MaskCell::Diagonal:
      return packRgba(255, 128, 191);
    case MaskCell::Dense:
      return packRgba(120, 170, 230);
    case MaskCell::PvSkipped:
      return packRgba(232, 84, 84);
    default:
      return packRgba(255, 0, 255);
  }
}

const char* maskCellLabel(MaskCell c) {
  switch (c) {
    case MaskCell::Invalid:
      return "no valid pair (causal / window)";
    case MaskCell::Off:
      return "off (not selected)";
    case MaskCell::Selected:
      return "on: top-CDF / top-k";
    case MaskCell::ForcedRow:
      return "on: forced, non-similar Q block";
    case MaskCell::ForcedCol:
      return "on: forced, non-similar K block";
    case MaskCell::Sink:
      return "on: sink";
    case MaskCell::Diagonal:
      return "on: diagonal (extension)";
    case MaskCell::Dense:
      return "on: dense head";
    case MaskCell::PvSkipped:
      return "on, PV skipped";
    default:
      return "?";
  }
}

const char* headLayerLabel(HeadLayer l) {
  switch (l) {
    case HeadLayer::Combined:
      return "Mask + PV skip";
    case HeadLayer::Mask:
      return "Block mask (stage 1)";
    case HeadLayer::PvSkipped:
      return "PV skipped (stage 2)";
    case HeadLayer::DroppedMass:
      return "Dropped attention mass";
    case HeadLayer::PooledProb:
      return "Pooled probability (P-hat)";
  }
  return "?";
}

bool headLayerIsContinuous(HeadLayer l) {
  return l == HeadLayer::DroppedMass || l == HeadLayer::PooledProb;
}

double droppedMassOfRow(const core::HeadResult& h, int row) {
  if (h.refBlockMass.empty() || row < 0 || row >= h.nq) return 0;
  double sum = 0;
  for (int j = 0; j < h.nk; ++j) {
    size_t i = static_cast<size_t>(row) * h.nk + j;
    bool computed = h.blockMask[i] && !(i < h.pvSkipped.size() && h.pvSkipped[i]);
    if (!computed && std::isfinite(h.refBlockMass[i])) sum += h.refBlockMass[i];
  }
  return sum;
}

int colouringThreads(int64_t blocks) {
  if (blocks < kThreadedColouringBlocks) return 1;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

void renderHeadThumbnail(const core::HeadResult& h, int maxSide, std::vector<uint32_t>& rgba, int* cols,
                         int* rows) {
  *cols = std::min(h.nk, maxSide);
  *rows = std::min(h.nq, maxSide);
  rgba.assign(static_cast<size_t>(*cols) * static_cast<size_t>(*rows), maskCellColor(MaskCell::Invalid));
  if (h.blockMask.size() < static_cast<size_t>(h.nq) * static_cast<size_t>(h.nk)) return;
  for (int y = 0; y < *rows; ++y) {
    size_t i = static_cast<size_t>(int64_t(y) * h.nq / *rows);
    for (int x = 0; x < *cols; ++x) {
      size_t j = static_cast<size_t>(int64_t(x) * h.nk / *cols);
      rgba[static_cast<size_t>(y) * *cols + x] = maskCellColor(classifyBlock(h, i * h.nk + j));
    }
  }
}

void renderHeadLayer(const core::HeadResult& h, HeadLayer layer, std::vector<uint32_t>& rgba, float* vmin,
                     float* vmax) {
  const size_t n = static_cast<size_t>(h.nq) * static_cast<size_t>(h.nk);
  rgba.assign(n, maskCellColor(MaskCell::Invalid));
  if (vmin) *vmin = 0;
  if (vmax) *vmax = 1;
  if (n == 0 || h.blockMask.size() < n) return;
  switch (layer) {
    case HeadLayer::Combined:
      for (size_t i = 0; i < n; ++i) rgba[i] = maskCellColor(classifyBlock(h, i));
      return;
    case HeadLayer::Mask:
      for (size_t i = 0; i < n; ++i) {
        MaskCell c = classifyBlock(h, i);
        if (c == MaskCell::PvSkipped) {
          // Show why stage 1 kept it, as if there were no PV skip.
          uint8_t r = h.reasons[i];
          c = (r & core::kReasonDenseHead)   ? MaskCell::Dense
              : (r & core::kReasonSelected)  ? MaskCell::Selected
              : (r & core::kReasonSink)      ? MaskCell::Sink
              : (r & core::kReasonForcedRow) ? MaskCell::ForcedRow
              : (r & core::kReasonForcedCol) ? MaskCell::ForcedCol
              : (r & core::kReasonDiagonal)  ? MaskCell::Diagonal
                                             : MaskCell::Selected;
        }
        rgba[i] = maskCellColor(c);
      }
      return;
    case HeadLayer::PvSkipped:
      for (size_t i = 0; i < n; ++i) {
        MaskCell c = classifyBlock(h, i);
        rgba[i] = c == MaskCell::PvSkipped ? maskCellColor(MaskCell::PvSkipped)
                  : c == MaskCell::Invalid ? maskCellColor(MaskCell::Invalid)
                  : c == MaskCell::Off     ? maskCellColor(MaskCell::Off)
                                           : packRgba(62, 110, 98);
      }
      return;
    case HeadLayer::DroppedMass:
    case HeadLayer::PooledProb: {
      const std::vector<float>& src = layer == HeadLayer::DroppedMass ? h.refBlockMass : h.pooledProb;
      if (src.size() < n) return;
      auto include = [&](size_t i) {
        if (layer == HeadLayer::PooledProb) return true;
        return !(h.blockMask[i] && !(i < h.pvSkipped.size() && h.pvSkipped[i]));
      };
      float hi = 0, lo = INFINITY;
      for (size_t i = 0; i < n; ++i) {
        float v = src[i];
        if (!include(i) || !std::isfinite(v) || v <= 0) continue;
        hi = std::max(hi, v);
        lo = std::min(lo, v);
      }
      if (hi <= 0) {
        for (size_t i = 0; i < n; ++i) {
          if (classifyBlock(h, i) != MaskCell::Invalid) rgba[i] = colormap(Colormap::Inferno, 0);
        }
        if (vmin) *vmin = 1e-6f;
        if (vmax) *vmax = 1;
        return;
      }
      lo = std::max(lo, hi * 1e-5f);
      float llo = std::log10(lo), lhi = std::log10(hi);
      float span = std::max(1e-6f, lhi - llo);
      Colormap map = layer == HeadLayer::DroppedMass ? Colormap::Inferno : Colormap::Viridis;
      for (size_t i = 0; i < n; ++i) {
        if (classifyBlock(h, i) == MaskCell::Invalid) continue;
        if (!include(i)) {
          rgba[i] = packRgba(40, 44, 54);  // computed blocks drop nothing
          continue;
        }
        float v = src[i];
        float t = (std::isfinite(v) && v > 0) ? (std::log10(std::max(v, lo)) - llo) / span : 0.0f;
        rgba[i] = colormap(map, t);
      }
      if (vmin) *vmin = lo;
      if (vmax) *vmax = hi;
      return;
    }
  }
}

}  // namespace sparge::gui
