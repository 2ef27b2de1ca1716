// Basic value types shared by every layer: dtypes, layouts, tile geometry, entry descriptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sparge::core {

enum class DType { Float16, BFloat16, Float32 };
enum class Layout { HND, NHD };  // HND = [B, H, N, D]; NHD = [B, N, H, D]

const char* toString(DType d);
const char* toString(Layout l);

// Tile geometry in tokens: blockQ query rows x blockK key rows. SpargeAttn uses 128x64 on sm80/sm89
// and 64x128 on sm90; every mask and sparsity figure records which one produced it.
struct Geometry {
  int blockQ = 128;
  int blockK = 64;

  std::string label() const;  // "128x64"
  // Parses "128x64" or "64x128"; throws sparge::Error for anything else.
  static Geometry parse(const std::string& text);
  // Number of Stage-2 iterations at the end of a row that are never PV-skipped and carry the
  // element masks: 2 for 128x64 (a 128-row diagonal spans two 64-key blocks), 1 for 64x128.
  int tailBlocks() const { return blockQ > blockK ? blockQ / blockK : 1; }
  bool operator==(const Geometry&) const = default;
};

inline constexpr Geometry kGeometry128x64{128, 64};
inline constexpr Geometry kGeometry64x128{64, 128};

inline int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// What a capture says about one attention call (one group under /entries).
struct EntryInfo {
  std::string name;  // group name under /entries
  int64_t batch = 0;
  int64_t headsQ = 0;
  int64_t headsKV = 0;
  int64_t tokensQ = 0;
  int64_t tokensKV = 0;
  int64_t headDim = 0;   // D of q and k
  int64_t headDimV = 0;  // D of v
  DType dtype = DType::Float16;
  Layout layout = Layout::HND;
  bool causal = false;
  double scale = 0.0;          // softmax scale used by attention (attribute or 1/sqrt(D))
  bool scaleFromFile = false;  // true when the entry carried a `scale` attribute
  std::optional<int64_t> layer;
  std::optional<int64_t> step;

  int64_t groupSize() const { return headsKV > 0 ? headsQ / headsKV : 0; }  // GQA query heads per KV head
  bool isGqa() const { return headsQ != headsKV; }
  int64_t kvHeadOf(int64_t qHead) const { return qHead / groupSize(); }
  int64_t bytesOnDisk() const;  // q + k + v payload in the stored dtype
};

}  // namespace sparge::core
