// The token grid of image and video entries (T frames × H rows × W columns, captures/FORMAT.md) and the
// token orders Stage 1 can walk it in (docs/permutation.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparge::core {

// Which of an entry's token sequences lie on the grid: both (self-attention over image or video tokens),
// only the queries (image tokens attending to text) or only the keys and values (text attending to them).
enum class GridTokens { QKV, Q, KV };
const char* toString(GridTokens t);                   // "qkv" | "q" | "kv"
GridTokens parseGridTokens(const std::string& text);  // throws sparge::Error naming the accepted values

// Tokens offset … offset + T·H·W − 1 of each sequence named by `tokens` are the grid, in row-major
// (t, h, w) order: token offset + (t·H + h)·W + w. Tokens before and after them (text, prompt, register
// tokens) are not on the grid and keep their places under every permutation.
struct TokenGrid {
  int64_t frames = 1;  // T
  int64_t height = 1;  // H
  int64_t width = 1;   // W
  int64_t offset = 0;
  GridTokens tokens = GridTokens::QKV;

  int64_t count() const { return frames * height * width; }
  bool onQ() const { return tokens != GridTokens::KV; }
  bool onKV() const { return tokens != GridTokens::Q; }
  std::string shape() const;  // "13x30x45"
  bool operator==(const TokenGrid&) const = default;
};
std::string toString(const TokenGrid& g);  // "13x30x45 from token 512 (q and kv)"

// What is wrong with `g` for an entry of tokensQ queries and tokensKV keys ("" when nothing): sizes below 1,
// a negative offset, or a grid that does not fit in a sequence it is on.
std::string gridProblem(const TokenGrid& g, int64_t tokensQ, int64_t tokensKV);
// "T,H,W" (or "TxHxW") with positive integers; throws sparge::Error(where, ...) otherwise.
TokenGrid parseGridShape(const std::string& text, const std::string& where);

// The order of the grid's tokens that Stage 1 walks (tokens off the grid stay in place):
//   None       the capture's order (no permutation at all; allowed on every entry)
//   RowMajor   (t, h, w) with w fastest: the capture's order of the grid, by the format's definition
//   TimeMajor  (h, w, t) with t fastest: one spatial position through every frame, then the next
//   Hilbert    a generalized 3-D Hilbert curve over T × H × W (docs/permutation.md)
enum class Permutation { None, RowMajor, TimeMajor, Hilbert };
const char* toString(Permutation p);                    // "none" | "rowmajor" | "timemajor" | "hilbert"
Permutation parsePermutation(const std::string& text);  // throws sparge::Error naming the accepted values
// "none,hilbert": each name once, in the order given; throws sparge::Error(where, ...) otherwise.
std::vector<Permutation> parsePermutationList(const std::string& text, const std::string& where);

}  // namespace sparge::core
