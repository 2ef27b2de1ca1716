#include "heatmap.h"

#include <algorithm>
#include <cmath>

#include "gl.h"

namespace sparge::gui {

namespace {
uint64_t g_uploads = 0;
}

uint64_t HeatmapTexture::uploads() { return g_uploads; }

HeatmapTexture::~HeatmapTexture() {
  if (tex_) glDeleteTextures(1, &tex_);
}

HeatmapTexture& HeatmapTexture::operator=(HeatmapTexture&& o) noexcept {
  if (this != &o) {
    if (tex_) glDeleteTextures(1, &tex_);
    tex_ = o.tex_;
    cols_ = o.cols_;
    rows_ = o.rows_;
    version_ = o.version_;
    o.tex_ = 0;
    o.version_ = ~uint64_t{0};
  }
  return *this;
}

bool HeatmapTexture::update(uint64_t version, const uint32_t* rgba, int cols, int rows) {
  if (tex_ && version == version_ && cols == cols_ && rows == rows_) return false;
  if (!tex_) glGenTextures(1, &tex_);
  glBindTexture(GL_TEXTURE_2D, tex_);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  if (cols != cols_ || rows != rows_) {
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, cols, rows, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
  } else {
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, cols, rows, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
  }
  cols_ = cols;
  rows_ = rows;
  version_ = version;
  ++g_uploads;
  return true;
}

void ZoomPan::clamp() {
  zoom = std::clamp(zoom, 1.0f, 256.0f);
  float half = 0.5f / zoom;
  cx = std::clamp(cx, half, 1.0f - half);
  cy = std::clamp(cy, half, 1.0f - half);
}

HeatmapHover drawHeatmap(const char* id, const HeatmapTexture& tex, ImVec2 size, float aspect, ZoomPan& zp,
                         int outlineRow, int outlineCol) {
  HeatmapHover hover;
  ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size, ImGuiButtonFlags_MouseButtonLeft);
  if (!tex.valid() || size.x < 4 || size.y < 4) return hover;
  // Fit the data rectangle in the box, centred, keeping the token aspect ratio.
  float w = size.x, h = size.x / std::max(aspect, 1e-6f);
  if (h > size.y) {
    h = size.y;
    w = size.y * aspect;
  }
  ImVec2 p0(std::floor(origin.x + (size.x - w) * 0.5f), std::floor(origin.y + (size.y - h) * 0.5f));
  ImVec2 p1(p0.x + w, p0.y + h);

  ImGuiIO& io = ImGui::GetIO();
  bool itemHovered = ImGui::IsItemHovered();
  bool inside = itemHovered && io.MousePos.x >= p0.x && io.MousePos.x < p1.x && io.MousePos.y >= p0.y &&
                io.MousePos.y < p1.y;
  zp.clamp();
  float half = 0.5f / zp.zoom;
  if (itemHovered && io.MouseWheel != 0.0f) {
    // Zoom around the pointer: the texel under it stays under it.
    float mx = std::clamp((io.MousePos.x - p0.x) / w, 0.0f, 1.0f);
    float my = std::clamp((io.MousePos.y - p0.y) / h, 0.0f, 1.0f);
    float u = zp.cx - half + mx * 2 * half;
    float v = zp.cy - half + my * 2 * half;
    zp.zoom *= std::pow(1.25f, io.MouseWheel);
    zp.clamp();
    half = 0.5f / zp.zoom;
    zp.cx = u - (mx - 0.5f) * 2 * half;
    zp.cy = v - (my - 0.5f) * 2 * half;
    zp.clamp();
  }
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 1.0f)) {
    zp.cx -= io.MouseDelta.x / w * 2 * half;
    zp.cy -= io.MouseDelta.y / h * 2 * half;
    zp.clamp();
  }
  if (itemHovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) zp.reset();
  half = 0.5f / zp.zoom;
  ImVec2 uv0(zp.cx - half, zp.cy - half), uv1(zp.cx + half, zp.cy + half);

  hover.p0 = p0;
  hover.p1 = p1;
  hover.uv0 = uv0;
  hover.uv1 = uv1;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddImage(tex.id(), p0, p1, uv0, uv1);
  dl->AddRect(ImVec2(p0.x - 1, p0.y - 1), ImVec2(p1.x + 1, p1.y + 1), IM_COL32(90, 96, 110, 255));

  auto cellRect = [&](int r, int c, ImVec2* a, ImVec2* b) {
    float u0 = float(c) / tex.cols(), u1 = float(c + 1) / tex.cols();
    float v0 = float(r) / tex.rows(), v1 = float(r + 1) / tex.rows();
    *a = ImVec2(p0.x + (u0 - uv0.x) / (uv1.x - uv0.x) * w, p0.y + (v0 - uv0.y) / (uv1.y - uv0.y) * h);
    *b = ImVec2(p0.x + (u1 - uv0.x) / (uv1.x - uv0.x) * w, p0.y + (v1 - uv0.y) / (uv1.y - uv0.y) * h);
  };
  if (inside) {
    float u = uv0.x + (io.MousePos.x - p0.x) / w * (uv1.x - uv0.x);
    float v = uv0.y + (io.MousePos.y - p0.y) / h * (uv1.y - uv0.y);
    hover.hovered = true;
    hover.col = std::clamp(int(u * tex.cols()), 0, tex.cols() - 1);
    hover.row = std::clamp(int(v * tex.rows()), 0, tex.rows() - 1);
  }
  int r = hover.hovered ? hover.row : outlineRow;
  int c = hover.hovered ? hover.col : outlineCol;
  if (r >= 0 && c >= 0) {
    ImVec2 a, b;
    cellRect(r, c, &a, &b);
    dl->PushClipRect(p0, p1, true);
    dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), IM_COL32(255, 255, 255, 230), 0, 0, 1.5f);
    dl->PopClipRect();
  }
  return hover;
}

}  // namespace sparge::gui
