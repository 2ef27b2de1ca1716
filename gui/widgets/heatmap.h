// Heatmaps as GL textures (uploaded only when their data changes) drawn with zoom, pan and hover.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <vector>

namespace sparge::gui {

// One RGBA8 texture with nearest filtering: a block grid is never blurred.
class HeatmapTexture {
 public:
  HeatmapTexture() = default;
  ~HeatmapTexture();
  HeatmapTexture(const HeatmapTexture&) = delete;
  HeatmapTexture& operator=(const HeatmapTexture&) = delete;
  HeatmapTexture(HeatmapTexture&& o) noexcept { *this = std::move(o); }
  HeatmapTexture& operator=(HeatmapTexture&& o) noexcept;

  // Uploads `rgba` (rows x cols, packed RGBA) unless `version` equals the version of the last upload.
  // Returns true when it uploaded.
  bool update(uint64_t version, const uint32_t* rgba, int cols, int rows);
  bool valid() const { return tex_ != 0; }
  ImTextureID id() const { return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(tex_)); }
  int cols() const { return cols_; }
  int rows() const { return rows_; }
  uint64_t version() const { return version_; }
  static uint64_t uploads();  // total uploads so far (the frame benchmark checks caching with it)

 private:
  unsigned tex_ = 0;
  int cols_ = 0, rows_ = 0;
  uint64_t version_ = ~uint64_t{0};
};

// Shared zoom/pan of linked panels: the visible window in texture coordinates [0, 1].
struct ZoomPan {
  float zoom = 1.0f;  // 1 = whole grid
  float cx = 0.5f, cy = 0.5f;
  void reset() { *this = ZoomPan{}; }
  void clamp();
};

struct HeatmapHover {
  bool hovered = false;
  int row = -1, col = -1;
  ImVec2 p0, p1;    // where the image was drawn
  ImVec2 uv0, uv1;  // the visible part of the texture
};

// Draws `tex` into a box of `size`, keeping `aspect` (width / height of the data in tokens). Mouse wheel
// zooms around the pointer, left-drag pans, double-click resets; all panels sharing `zp` follow.
// Returns the hovered cell. `outline` (row, col >= 0) draws a frame around one cell (linked hover).
HeatmapHover drawHeatmap(const char* id, const HeatmapTexture& tex, ImVec2 size, float aspect, ZoomPan& zp,
                         int outlineRow = -1, int outlineCol = -1);

}  // namespace sparge::gui
