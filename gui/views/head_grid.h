// Head grid: small multiples of every head's block mask, labelled with sparsity and L1; click selects.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "view.h"
#include "widgets/heatmap.h"

namespace sparge::gui {

class HeadGrid final : public View {
 public:
  void draw(Session& session, UiState& ui) override;
  // For the frame benchmark: textures uploaded by this view so far.
  size_t textureCount() const { return textures_.size(); }

 private:
  void syncTextures(const core::EntryResult& r, uint64_t generation);
  void drawToolbar(UiState& ui);
  void drawCell(Session& s, const core::EntryResult& r, const core::HeadResult& h, size_t index, ImVec2 pos,
                ImVec2 thumb, float cellW, float labelH, bool multiBatch);

  // Thumbnails are at most this many texels a side (the slider's largest thumbnail is 240 px).
  static constexpr int kThumbnailTexels = 256;
  // Keyed by (batch, head). A texture is re-uploaded only when its head's mask content changed.
  std::map<std::pair<int64_t, int64_t>, HeatmapTexture> textures_;
  std::map<std::pair<int64_t, int64_t>, uint64_t> hashes_;
  uint64_t syncedGeneration_ = ~uint64_t{0};
  struct Thumbnail {
    std::vector<uint32_t> rgba;
    int cols = 0, rows = 0;
    uint64_t hash = 0;
    bool stale = false;  // rendered this frame, to be uploaded
  };
  std::vector<Thumbnail> scratch_;  // one per head of the result, reused between results
};

// FNV-1a over a head's mask, PV-skip and reason bytes: detects which heads a re-run really changed.
uint64_t headContentHash(const core::HeadResult& h);

}  // namespace sparge::gui
