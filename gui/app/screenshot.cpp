#include <stb_image_write.h>

#include <vector>

#include "platform.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "widgets/gl.h"

namespace sparge::gui {

void writeFramebufferPng(const std::string& path, int w, int h) {
  if (w <= 0 || h <= 0) throw Error(path, "empty framebuffer");
  std::vector<unsigned char> pixels(static_cast<size_t>(w) * h * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  std::vector<unsigned char> flipped(pixels.size());
  for (int y = 0; y < h; ++y) {
    std::copy_n(&pixels[static_cast<size_t>(h - 1 - y) * w * 4], static_cast<size_t>(w) * 4,
                &flipped[static_cast<size_t>(y) * w * 4]);
  }
  for (size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;  // the window is opaque
  core::writeAtomically(path, [&](const std::string& tmp) {
    if (!stbi_write_png(tmp.c_str(), w, h, 4, flipped.data(), w * 4)) throw Error(path, "cannot write PNG");
  });
}

}  // namespace sparge::gui
