// A head's maps in the capture's token order.
#include "capture_order.h"

#include <algorithm>
#include <cmath>

namespace sparge::gui {

void renderHeadLayerInCaptureOrder(const core::HeadResult& h, HeadLayer layer, const core::EntryInfo& info,
                                   const core::Geometry& g, const core::TokenPermutation& perm,
                                   std::vector<uint32_t>& rgba, float* vmin, float* vmax) {
  const size_t n = size_t(h.nq) * size_t(h.nk);
  rgba.assign(n, maskCellColor(MaskCell::Invalid));
  *vmin = 0;
  *vmax = 1;
  if (n == 0 || h.blockMask.size() < n) return;
  std::vector<float> values(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    const bool pvRan = h.blockMask[i] && !(i < h.pvSkipped.size() && h.pvSkipped[i]);
    switch (layer) {
      case HeadLayer::Combined:
      case HeadLayer::Mask:
        values[i] = h.blockMask[i] ? 1.0f : 0.0f;
        break;
      case HeadLayer::PvSkipped:
        values[i] = pvRan ? 1.0f : 0.0f;
        break;
      case HeadLayer::DroppedMass:
        values[i] = !pvRan && i < h.refBlockMass.size() ? h.refBlockMass[i] : 0.0f;
        break;
      case HeadLayer::PooledProb:
        values[i] = i < h.pooledProb.size() ? h.pooledProb[i] : 0.0f;
        break;
    }
  }
  const std::vector<float> mapped =
      core::blockValuesInCaptureOrder(values, h.nq, h.nk, g, info.tokensQ, info.tokensKV, perm);
  const bool fraction =
      layer == HeadLayer::Mask || layer == HeadLayer::PvSkipped || layer == HeadLayer::Combined;
  if (!fraction) {
    *vmax = 0;
    for (float v : mapped) *vmax = std::max(*vmax, std::isfinite(v) ? v : 0.0f);
    if (*vmax <= 0) *vmax = 1;
  }
  const Colormap map = layer == HeadLayer::DroppedMass ? Colormap::Inferno : Colormap::Viridis;
  for (size_t i = 0; i < n; ++i) rgba[i] = colormap(map, mapped[i] / *vmax);
}

}  // namespace sparge::gui
