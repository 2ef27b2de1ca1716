#include "report_writer.h"

#include <stb_image_write.h>

#include <algorithm>
#include <filesystem>

#include "heat_colors.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/core/exports.h"

namespace sparge::gui {

void writeHeadPng(const std::string& path, const core::HeadResult& head, int layer) {
  std::vector<uint32_t> rgba;
  float lo = 0, hi = 1;
  renderHeadLayer(head, static_cast<HeadLayer>(layer), rgba, &lo, &hi);
  if (head.nq <= 0 || head.nk <= 0) throw Error(path, "head has no block grid");
  // Upscale so the long side is at least 256 px: a 16x32 grid as 16x32 pixels is unreadable.
  int scale = std::max(1, 256 / std::max(head.nq, head.nk));
  int w = head.nk * scale, h = head.nq * scale;
  std::vector<uint32_t> img(static_cast<size_t>(w) * h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x)
      img[static_cast<size_t>(y) * w + x] = rgba[static_cast<size_t>(y / scale) * head.nk + x / scale];
  }
  core::writeAtomically(path, [&](const std::string& tmp) {
    if (!stbi_write_png(tmp.c_str(), w, h, 4, img.data(), w * 4)) throw Error(path, "cannot write PNG");
  });
}

void writeReportMarkdown(const std::string& path, const core::EntryResult& r,
                         const std::string& capturePath) {
  namespace fs = std::filesystem;
  fs::path md(path);
  std::string imgDirName = md.stem().string() + "_img";
  fs::path imgDir = md.parent_path() / imgDirName;
  // Like every export, the report needs an existing folder (only the image folder beside it is created).
  core::checkWritableTarget(path, path);
  std::error_code ec;
  fs::create_directory(imgDir, ec);
  if (ec) throw Error(imgDir.string(), "cannot create the image folder: " + ec.message());

  // Built piece by piece: GCC 12 warns falsely (-Wrestrict) about "b" + std::string.
  auto stemOf = [](const core::HeadResult& h) {
    std::string stem = "b";
    stem += std::to_string(h.batch);
    stem += "_h";
    stem += std::to_string(h.head);
    return stem;
  };
  for (const auto& h : r.heads) {
    writeHeadPng((imgDir / (stemOf(h) + "_mask.png")).string(), h, static_cast<int>(HeadLayer::Combined));
    writeHeadPng((imgDir / (stemOf(h) + "_dropped.png")).string(), h,
                 static_cast<int>(HeadLayer::DroppedMass));
  }
  // The figures and their layout are the CLI's report; the GUI adds the colour legend and two images a head.
  core::MarkdownExtras extras;
  extras.legend =
      "Legend: green = selected by top-CDF / top-k, orange = forced (non-similar Q block), yellow = forced "
      "(non-similar K block), purple = sink, pink = diagonal (extension), blue = dense head, red = PV "
      "skipped, grey = off, black = no valid pair (causal or outside the window). Dropped mass: reference "
      "attention mass of blocks whose PV was not computed (log scale, inferno).";
  extras.headers = {"mask", "dropped mass"};
  extras.cells = [&](const core::EntryResult&, const core::HeadResult& h) {
    const std::string link = imgDirName + "/" + stemOf(h);
    return std::vector<std::string>{"![mask](" + link + "_mask.png)", "![dropped](" + link + "_dropped.png)"};
  };
  core::writeReportMarkdown(path, {r}, capturePath, extras);
}

}  // namespace sparge::gui
