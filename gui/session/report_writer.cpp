#include "report_writer.h"

#include <stb_image_write.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "heat_colors.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"

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

  std::ostringstream o;
  char buf[512];
  o << "# Sparge Studio report: " << r.info.name << "\n\n";
  o << "- Capture: `" << capturePath << "`\n";
  o << "- Engine: " << r.engine << "\n";
  std::snprintf(buf, sizeof buf, "- Shape: B=%lld, Hq=%lld, Hkv=%lld, Nq=%lld, Nkv=%lld, D=%lld, %s%s\n",
                (long long)r.info.batch, (long long)r.info.headsQ, (long long)r.info.headsKV,
                (long long)r.info.tokensQ, (long long)r.info.tokensKV, (long long)r.info.headDim,
                core::toString(r.info.dtype), r.info.causal ? ", causal" : "");
  o << buf;
  o << "- Numerics: " << core::toString(r.config.numerics) << "; geometry: " << r.config.geometry.label()
    << ", smooth_k " << (r.config.smoothK ? "on" : "off") << ", sink " << (r.config.sink ? "on" : "off")
    << (r.config.diagonal ? ", diagonal blocks on (an extension, not SpargeAttn's)" : "") << "\n";
  std::snprintf(buf, sizeof buf,
                "- Entry: stage-1 sparsity %.1f %%, PV-skip rate %.1f %%, total sparsity %.1f %%, L1 %.4f "
                "(sparsity alone %.4f, quantization alone %.4f), cos %.5f\n",
                100 * r.sparsity.stage1(), 100 * r.sparsity.pvSkipRate(), 100 * r.sparsity.total(),
                r.error.l1(), r.errorSparse.l1(), r.errorQuant.l1(), r.error.cosSim());
  o << buf;
  std::snprintf(buf, sizeof buf,
                "- Times (%s clock): predict %.2f ms, sparse %.2f ms, reference %.2f ms%s, total %.2f ms\n\n",
                r.times.clock.c_str(), r.times.predictMs, r.times.sparseMs, r.times.referenceMs,
                r.times.referenceCached ? " (cached)" : "", r.times.totalMs);
  o << buf;
  o << "Legend: green = selected by top-CDF / top-k, orange = forced (non-similar Q block), yellow = forced "
       "(non-similar K block), purple = sink, pink = diagonal (extension), blue = dense head, red = PV "
       "skipped, grey = off, black = no "
       "valid pair (causal or outside the window). Dropped mass: reference attention mass of blocks whose PV "
       "was not computed (log scale, inferno). L1 is what deployment gives (sparse, in the numerics above); "
       "L1 sparse is the same mask in exact numerics, L1 quant every valid block in the numerics above.\n\n";
  o << "| batch | head | mode | θ | τ / top-k | λ | stage-1 | PV skip | total | L1 | L1 sparse | L1 quant | "
       "cos "
       "| mask | dropped mass |\n";
  o << "|---:|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|:---:|\n";
  for (const auto& h : r.heads) {
    // Built piece by piece: GCC 12 warns falsely (-Wrestrict) about "b" + std::string.
    std::string stem = "b";
    stem += std::to_string(h.batch);
    stem += "_h";
    stem += std::to_string(h.head);
    writeHeadPng((imgDir / (stem + "_mask.png")).string(), h, static_cast<int>(HeadLayer::Combined));
    writeHeadPng((imgDir / (stem + "_dropped.png")).string(), h, static_cast<int>(HeadLayer::DroppedMass));
    bool topk = h.params.mode == core::SelectMode::TopK;
    std::snprintf(
        buf, sizeof buf,
        "| %lld | %lld | %s | %.3f | %.3f | %g | %.1f %% | %.1f %% | %.1f %% | %.4f | %.4f | %.4f | %.5f | "
        "![mask](%s/%s_mask.png) | ![dropped](%s/%s_dropped.png) |\n",
        (long long)h.batch, (long long)h.head, h.params.dense ? "dense" : (topk ? "top-k" : "cdf"),
        h.params.theta, topk ? h.params.topk : h.params.tau, h.params.lambda, 100 * h.sparsity.stage1(),
        100 * h.sparsity.pvSkipRate(), 100 * h.sparsity.total(), h.error.l1(), h.errorSparse.l1(),
        h.errorQuant.l1(), h.error.cosSim(), imgDirName.c_str(), stem.c_str(), imgDirName.c_str(),
        stem.c_str());
    o << buf;
  }
  core::writeTextAtomically(path, o.str());
}

}  // namespace sparge::gui
