// The token grid of image and video entries and the names of the token orders: parsing and validation.
#include "sparge/core/token_grid.h"

#include <cctype>
#include <initializer_list>
#include <limits>

#include "enum_names.h"
#include "sparge/core/error.h"

namespace sparge::core {
namespace {

// Grids beyond this many tokens cannot be a real sequence (and T·H·W would overflow before that).
constexpr int64_t kMaxGridSide = int64_t(1) << 20;

}  // namespace

const char* toString(GridTokens t) {
  switch (t) {
    case GridTokens::QKV:
      return "qkv";
    case GridTokens::Q:
      return "q";
    case GridTokens::KV:
      return "kv";
  }
  return "?";
}

GridTokens parseGridTokens(const std::string& text) {
  return parseByName(text, {GridTokens::QKV, GridTokens::Q, GridTokens::KV}, "grid tokens");
}

std::string TokenGrid::shape() const {
  return std::to_string(frames) + "x" + std::to_string(height) + "x" + std::to_string(width);
}

std::string toString(const TokenGrid& g) {
  const char* on = g.tokens == GridTokens::QKV ? "q and kv"
                   : g.tokens == GridTokens::Q ? "q only"
                                               : "kv only";
  return g.shape() + " from token " + std::to_string(g.offset) + " (" + on + ")";
}

std::string gridProblem(const TokenGrid& g, int64_t tokensQ, int64_t tokensKV) {
  if (g.frames < 1 || g.height < 1 || g.width < 1)
    return "grid " + g.shape() + " has a side below 1 — give T, H, W as positive token counts";
  if (g.frames > kMaxGridSide || g.height > kMaxGridSide || g.width > kMaxGridSide)
    return "grid " + g.shape() + " has a side above " + std::to_string(kMaxGridSide) + " tokens";
  if (g.offset < 0)
    return "grid_offset = " + std::to_string(g.offset) + " — use the index (>= 0) of the first grid token";
  auto fits = [&](int64_t n, const char* seq) -> std::string {
    if (g.count() <= n && g.offset <= n - g.count()) return "";
    return "grid " + g.shape() + " (" + std::to_string(g.count()) + " tokens) from token " +
           std::to_string(g.offset) + " does not fit in the " + std::to_string(n) + " " + seq +
           " tokens — check T, H, W (latent frames and rows/columns after patching) and grid_offset";
  };
  if (g.onQ())
    if (std::string p = fits(tokensQ, "query"); !p.empty()) return p;
  if (g.onKV())
    if (std::string p = fits(tokensKV, "key/value"); !p.empty()) return p;
  return "";
}

TokenGrid parseGridShape(const std::string& text, const std::string& where) {
  const std::string help = " — give T,H,W as three positive integers, e.g. 13,30,45 (T = 1 for an image)";
  int64_t v[3] = {0, 0, 0};
  size_t i = 0;
  int n = 0;
  while (n < 3) {
    if (i >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i])))
      throw Error(where, "'" + text + "' is not a grid" + help);
    int64_t x = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (x > (std::numeric_limits<int64_t>::max() - 9) / 10)
        throw Error(where, "'" + text + "' is too large" + help);
      x = x * 10 + (text[i] - '0');
    }
    v[n++] = x;
    if (n < 3) {
      if (i >= text.size() || (text[i] != ',' && text[i] != 'x' && text[i] != 'X'))
        throw Error(where, "'" + text + "' is not a grid" + help);
      ++i;
    }
  }
  if (i != text.size()) throw Error(where, "'" + text + "' is not a grid" + help);
  TokenGrid g;
  g.frames = v[0];
  g.height = v[1];
  g.width = v[2];
  if (g.frames < 1 || g.height < 1 || g.width < 1 || g.frames > kMaxGridSide || g.height > kMaxGridSide ||
      g.width > kMaxGridSide)
    throw Error(where, "'" + text + "' has a side outside [1, " + std::to_string(kMaxGridSide) + "]" + help);
  return g;
}

const char* toString(Permutation p) {
  switch (p) {
    case Permutation::None:
      return "none";
    case Permutation::RowMajor:
      return "rowmajor";
    case Permutation::TimeMajor:
      return "timemajor";
    case Permutation::Hilbert:
      return "hilbert";
  }
  return "?";
}

Permutation parsePermutation(const std::string& text) {
  return parseByName(text,
                     {Permutation::None, Permutation::RowMajor, Permutation::TimeMajor, Permutation::Hilbert},
                     "permutation");
}

std::vector<Permutation> parsePermutationList(const std::string& text, const std::string& where) {
  std::vector<Permutation> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string name =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    Permutation p;
    try {
      p = parsePermutation(name);
    } catch (const Error& e) {
      throw Error(where, e.problem());
    }
    for (Permutation q : out)
      if (q == p) throw Error(where, "'" + name + "' is given twice");
    out.push_back(p);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace sparge::core
