// Basic value types shared by every layer: dtypes, layouts, tile geometry, entry descriptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sparge/core/token_grid.h"

namespace sparge::core {

enum class DType { Float16, BFloat16, Float32 };
enum class Layout { HND, NHD };  // HND = [B, H, N, D]; NHD = [B, N, H, D]

const char* toString(DType d);
const char* toString(Layout l);

// Arithmetic of Stage 2 (Q·Kᵀ and P·V), as SpargeAttn's kernels do it on each GPU family:
//   None     exact: fp32 (CPU engine) or fp16/bf16 inputs with fp32 accumulation (CUDA engine)
//   Int8Fp16 sm80: INT8 Q·Kᵀ (per-block scales, K smoothed), fp16 P·V with fp16 per-block accumulation
//   Int8Fp8  sm89/sm90: INT8 Q·Kᵀ, FP8 e4m3 P and V (per-channel V scales), fp32 accumulation
enum class Numerics { None, Int8Fp16, Int8Fp8 };
const char* toString(Numerics n);                 // "none" | "int8-fp16" | "int8-fp8"
Numerics parseNumerics(const std::string& text);  // throws sparge::Error naming the accepted values

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

// The GPU family whose SpargeAttn kernel a run imitates: it fixes the tile geometry and the numerics
// (sm80: 128x64, int8-fp16; sm89: 128x64, int8-fp8; sm90: 64x128, int8-fp8).
enum class Target { Sm80, Sm89, Sm90 };
const char* toString(Target t);               // "sm80" | "sm89" | "sm90"
Target parseTarget(const std::string& text);  // throws sparge::Error naming the accepted values
Geometry geometryOf(Target t);
Numerics numericsOf(Target t);
// The kernel family SpargeAttn dispatches on a GPU of compute capability major*10 + minor: sm80 on Ampere
// (8.0, 8.6, 8.7), sm90 on Hopper (9.x), sm89 on every other GPU (Ada, Blackwell and newer).
Target targetForComputeCapability(int cc);
// The target whose tiles and numerics these are (sm89 before sm90: both use int8-fp8); none for others.
std::optional<Target> targetOf(const Geometry& g, Numerics n);

// A local attention window in FlashAttention's convention: query i sees keys i - left ... i + right
// (top-left aligned, like causal); -1 = unbounded on that side. Causal attention is right = 0.
struct Window {
  int64_t left = -1;
  int64_t right = -1;
  bool bounded() const { return left >= 0 || right >= 0; }
  bool operator==(const Window&) const = default;
};

// The keys [first, last] (inclusive) query `query` may see among nKv keys; empty when first > last.
struct KeyRange {
  int64_t first = 0;
  int64_t last = -1;
  bool empty() const { return first > last; }
};
KeyRange visibleKeys(int64_t query, int64_t nKv, bool causal, const Window& window);
std::string toString(const Window& w);  // "[left, right]"

// ⌈a / b⌉ for a >= 0, b > 0, without forming a + b − 1 (which overflows near the int64 limit).
inline int64_t ceilDiv(int64_t a, int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

// The shapes every entry keeps (the reader refuses files beyond them, `sparge synth` options beyond them):
// each dimension fits an int (block counts and engine loops use int) and each tensor's float32 copy fits
// comfortably in int64 bytes, so no size computed from a valid shape can overflow.
inline constexpr int64_t kMaxDimension = 2147483647;
inline constexpr int64_t kMaxTensorValues = int64_t(1) << 59;

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
  Window window;               // attribute `window` [left, right]; unbounded when absent
  double scale = 0.0;          // softmax scale used by attention (attribute or 1/sqrt(D))
  bool scaleFromFile = false;  // true when the entry carried a `scale` attribute
  std::optional<int64_t> layer;
  std::optional<int64_t> step;
  std::string module;  // attribute `module`: the model's module path, e.g. model.layers.3.self_attn
  std::string kind;    // attribute `kind`: "self" | "cross" (empty when not recorded)
  std::string stack;   // attribute `stack`: "encoder" | "decoder" | ... (empty when not recorded)
  std::optional<TokenGrid> grid;  // attributes `grid`, `grid_offset`, `grid_tokens` (image / video tokens)
  // The order of the tokens in memory: None as captured; otherwise permuteEntry() reordered them.
  Permutation permutation = Permutation::None;

  int64_t groupSize() const { return headsKV > 0 ? headsQ / headsKV : 0; }  // GQA query heads per KV head
  bool isGqa() const { return headsQ != headsKV; }
  int64_t kvHeadOf(int64_t qHead) const { return qHead / groupSize(); }
  int64_t bytesOnDisk() const;  // q + k + v payload in the stored dtype (saturates at the int64 limit)
  // Why this shape is out of the limits above (a dimension below 1 or above kMaxDimension, a tensor of more
  // than kMaxTensorValues values), naming the dimension as `sparge synth` does (batch, heads, kv-heads,
  // tokens, kv-tokens, dim, dim-v; a tensor's factors as "batch/heads/tokens/dim").
  struct ShapeProblem {
    std::string dimension;  // empty when the shape is within the limits
    std::string problem;
  };
  ShapeProblem shapeProblem() const;
};

}  // namespace sparge::core
