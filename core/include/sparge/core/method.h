// Which block predictor a run uses (SpargeAttn's Stage 1 or another training-free method) and the per-head
// parameters of the other methods (docs/methods.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparge::core {

// SpargeAttn is the default and runs exactly as docs/method.md describes. The others replace Stage 1 only:
// they produce a block mask at the run's tile geometry, and Stage 2, the PV skip, numerics and errors are
// shared.
enum class Method { SpargeAttn, XAttention, MInference, FlexPrefill, Moba };
inline constexpr Method kAllMethods[] = {Method::SpargeAttn, Method::XAttention, Method::MInference,
                                         Method::FlexPrefill, Method::Moba};
const char* toString(Method m);     // "spargeattn" | "xattention" | "minference" | "flexprefill" | "moba"
const char* methodLabel(Method m);  // "SpargeAttn", "XAttention", "MInference", "FlexPrefill", "MoBA"
Method parseMethod(const std::string& text, const char* where = "--method");
// A comma-separated list of method names, in the order given, without repeats.
std::vector<Method> parseMethodList(const std::string& text, const char* where = "--methods");

// XAttention (Xu et al., 2025): each block's importance is the sum of its strided antidiagonals' softmax
// probabilities; per query block, blocks are kept (largest first) until they hold τ of the row's total.
struct XAttentionParams {
  double threshold = 0.9;  // τ in [0, 1]
  int stride = 8;          // S: antidiagonal stride, a power of two dividing both tile sides
  bool operator==(const XAttentionParams&) const = default;
};

// MInference (Jiang et al., 2024): per head, either vertical-slash lines (key columns and diagonals with the
// most attention from the last 64 queries) or block-sparse (top key blocks by pooled Q·K).
enum class MInferencePattern { VerticalSlash, BlockSparse };
const char* toString(MInferencePattern p);  // "vertical_slash" | "block_sparse"
MInferencePattern parseMInferencePattern(const std::string& text, const char* where);

struct MInferenceParams {
  MInferencePattern pattern = MInferencePattern::VerticalSlash;
  int64_t verticalSize = 1000;  // vertical_size: key columns kept (at least 30, as upstream clamps)
  int64_t slashSize = 6096;     // slash_size: diagonals kept (at least 50)
  int64_t topk = 100;           // block_sparse: key blocks kept per query block
  bool operator==(const MInferenceParams&) const = default;
};

// FlexPrefill (Lai et al., 2025): vertical and slash lines covering γ of the last query block's attention,
// or, for a query-aware head (pooled and true block distributions closer than τ in Jensen-Shannon distance),
// the pooled block scores covering γ.
struct FlexPrefillParams {
  double gamma = 0.9;     // γ in [0, 1]: attention coverage
  double tau = 0.1;       // τ >= 0: query-aware threshold on the square-root JS divergence
  int64_t minBudget = 0;  // min_budget in tokens (0: one block)
  int64_t maxBudget = 0;  // max_budget in tokens (0: no limit)
  bool operator==(const FlexPrefillParams&) const = default;
};

// A MoBA-style gate (Lu et al., 2025) used training-free: each query token scores every key block by
// q · mean(K block) and keeps its top-k, its own block included.
struct MobaParams {
  int64_t topk = 3;  // blocks per query token, the current one included (>= 1)
  bool operator==(const MobaParams&) const = default;
};

}  // namespace sparge::core
