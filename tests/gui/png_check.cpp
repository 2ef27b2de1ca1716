// Screenshot checker for the GUI tests: both PNGs are not blank, and the given region differs between them.
// usage: gui_png_check A.png B.png X0 Y0 X1 Y1   (region as fractions of the image size)
#include <stb_image.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace {
struct Image {
  int w = 0, h = 0;
  unsigned char* px = nullptr;
  ~Image() { stbi_image_free(px); }
};

bool load(const char* path, Image& img) {
  int n = 0;
  img.px = stbi_load(path, &img.w, &img.h, &n, 4);
  if (!img.px) {
    std::fprintf(stderr, "cannot read %s: %s\n", path, stbi_failure_reason());
    return false;
  }
  return true;
}

// Not blank: many distinct colours and a real spread of brightness.
bool notBlank(const char* name, const Image& img) {
  std::set<unsigned> colors;
  double sum = 0, sum2 = 0;
  size_t n = static_cast<size_t>(img.w) * img.h;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char* p = img.px + 4 * i;
    colors.insert(p[0] | (p[1] << 8) | (p[2] << 16));
    double l = 0.3 * p[0] + 0.59 * p[1] + 0.11 * p[2];
    sum += l;
    sum2 += l * l;
  }
  double mean = sum / n, sd = std::sqrt(std::max(0.0, sum2 / n - mean * mean));
  std::printf("%s: %dx%d, %zu colours, luminance mean %.1f sd %.1f\n", name, img.w, img.h, colors.size(),
              mean, sd);
  return colors.size() >= 50 && sd >= 10;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s A.png B.png X0 Y0 X1 Y1\n", argv[0]);
    return 2;
  }
  Image a, b;
  if (!load(argv[1], a) || !load(argv[2], b)) return 1;
  if (a.w != b.w || a.h != b.h) {
    std::fprintf(stderr, "sizes differ\n");
    return 1;
  }
  bool ok = notBlank(argv[1], a) & notBlank(argv[2], b);
  int x0 = int(std::atof(argv[3]) * a.w), y0 = int(std::atof(argv[4]) * a.h);
  int x1 = int(std::atof(argv[5]) * a.w), y1 = int(std::atof(argv[6]) * a.h);
  size_t diff = 0, total = 0;
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) {
      const unsigned char* p = a.px + 4 * (size_t(y) * a.w + x);
      const unsigned char* q = b.px + 4 * (size_t(y) * b.w + x);
      diff += (std::abs(p[0] - q[0]) + std::abs(p[1] - q[1]) + std::abs(p[2] - q[2])) > 24;
      ++total;
    }
  }
  double frac = total ? double(diff) / double(total) : 0;
  std::printf("mask region [%d,%d)-[%d,%d): %.2f %% of pixels differ\n", x0, y0, x1, y1, 100 * frac);
  if (frac < 0.005) {
    std::fprintf(stderr, "the mask region does not differ between the two settings\n");
    ok = false;
  }
  if (!ok) std::fprintf(stderr, "FAILED\n");
  return ok ? 0 : 1;
}
