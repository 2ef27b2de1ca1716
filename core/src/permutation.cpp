// Token permutations of image and video entries: building the permuted entry, restoring the capture's
// order of outputs, and block maps seen in the capture's token order.
#include "sparge/core/permutation.h"

#include <algorithm>
#include <cmath>

#include "sparge/core/error.h"

namespace sparge::core {
namespace {

// The whole sequence of n tokens: the grid's tokens in the order of `p`, every other token in place.
std::vector<int64_t> sequenceOrder(int64_t n, const TokenGrid& g, Permutation p) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = i;
  const std::vector<int64_t> order = gridOrder(g.frames, g.height, g.width, p);
  for (size_t i = 0; i < order.size(); ++i) perm[size_t(g.offset) + i] = g.offset + order[i];
  return perm;
}

// Rows of every (batch, head) slice of a [B, H, N, width] buffer reordered: row i of the result is row
// perm[i] of the source.
FloatBuffer permuteRows(const FloatBuffer& src, int64_t slices, int64_t n, int64_t width,
                        const std::vector<int64_t>& perm) {
  FloatBuffer out;
  out.resize(src.size());
  for (int64_t s = 0; s < slices; ++s) {
    const float* from = src.data() + s * n * width;
    float* to = out.data() + s * n * width;
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(from + perm[size_t(i)] * width, size_t(width), to + i * width);
  }
  return out;
}

// For each capture token, the permuted block that holds it (blocks of `block` tokens).
std::vector<int> blockOfCaptureToken(int64_t n, int block, const std::vector<int64_t>& perm) {
  std::vector<int> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t original = perm.empty() ? i : perm[size_t(i)];
    out[size_t(original)] = int(i / block);
  }
  return out;
}

// share[r · nBlocks + b]: the fraction of capture tile r's tokens that sit in permuted block b.
std::vector<float> tileShares(int64_t n, int block, int nBlocks, const std::vector<int64_t>& perm) {
  const std::vector<int> blockOf = blockOfCaptureToken(n, block, perm);
  std::vector<float> share(size_t(nBlocks) * size_t(nBlocks), 0.0f);
  for (int r = 0; r < nBlocks; ++r) {
    const int64_t first = int64_t(r) * block, last = std::min<int64_t>(n, first + block);
    const float w = 1.0f / float(last - first);
    for (int64_t t = first; t < last; ++t) share[size_t(r) * nBlocks + blockOf[size_t(t)]] += w;
  }
  return share;
}

}  // namespace

std::string permutationProblem(const EntryInfo& info, Permutation p) {
  if (p == Permutation::None) return "";
  if (!info.grid)
    return "entry " + info.name + " has no token grid, so there is nothing to permute — record it with " +
           "`sparge annotate FILE --entry " + info.name +
           " --grid T,H,W [--grid-offset N]`, or use --permute none";
  if (info.causal || info.window.bounded())
    return std::string("entry ") + info.name + " is " + (info.causal ? "causal" : "windowed") +
           ": its mask decides by token position which keys a query sees, and reordering the tokens would " +
           "change that — permutations apply to bidirectional (image, video) attention; use --permute none";
  if (info.permutation != Permutation::None)
    return "entry " + info.name + " is already in " + toString(info.permutation) + " order";
  return gridProblem(*info.grid, info.tokensQ, info.tokensKV);
}

TokenPermutation tokenPermutation(const EntryInfo& info, Permutation p, const std::string& where) {
  if (std::string problem = permutationProblem(info, p); !problem.empty()) throw Error(where, problem);
  TokenPermutation perm;
  perm.kind = p;
  if (p == Permutation::None) return perm;
  const TokenGrid& g = *info.grid;
  if (g.onQ()) perm.q = sequenceOrder(info.tokensQ, g, p);
  if (g.onKV()) perm.kv = sequenceOrder(info.tokensKV, g, p);
  return perm;
}

std::shared_ptr<const EntryData> permuteEntry(std::shared_ptr<const EntryData> entry, Permutation p,
                                              const std::string& where) {
  const EntryInfo& in = entry->info;
  const TokenPermutation perm = tokenPermutation(in, p, where);
  if (p == Permutation::None) return entry;
  auto out = std::make_shared<EntryData>();
  out->info = in;
  out->info.permutation = p;
  out->digest = entry->digest;  // the captured content's identity; the file records the order apart
  const int64_t qSlices = in.batch * in.headsQ, kvSlices = in.batch * in.headsKV;
  out->q = perm.q.empty() ? entry->q : permuteRows(entry->q, qSlices, in.tokensQ, in.headDim, perm.q);
  out->k = perm.kv.empty() ? entry->k : permuteRows(entry->k, kvSlices, in.tokensKV, in.headDim, perm.kv);
  out->v = perm.kv.empty() ? entry->v : permuteRows(entry->v, kvSlices, in.tokensKV, in.headDimV, perm.kv);
  return out;
}

std::shared_ptr<const EntryData> PermutedEntries::get(Permutation p, const std::string& where) {
  if (p == Permutation::None) return base_;
  auto it = built_.find(p);
  if (it == built_.end()) it = built_.emplace(p, permuteEntry(base_, p, where)).first;
  return it->second;
}

void restoreRowOrder(std::vector<float>& rows, int64_t width, const std::vector<int64_t>& perm) {
  if (perm.empty() || rows.empty()) return;
  if (rows.size() != perm.size() * size_t(width))
    throw Error("token order", "rows do not match the permutation's length");
  std::vector<float> out(rows.size());
  for (size_t i = 0; i < perm.size(); ++i)
    std::copy_n(rows.data() + i * size_t(width), size_t(width), out.data() + size_t(perm[i]) * size_t(width));
  rows.swap(out);
}

void restoreOutputOrder(EntryResult& result, const TokenPermutation& perm) {
  for (HeadResult& h : result.heads) restoreRowOrder(h.output, result.info.headDimV, perm.q);
}

TokenPermutation appliedPermutation(const EntryInfo& info) {
  EntryInfo captured = info;
  captured.permutation = Permutation::None;
  return tokenPermutation(captured, info.permutation, "token order");
}

std::vector<float> blockMapInCaptureOrder(const std::vector<uint8_t>& map, int nq, int nk, const Geometry& g,
                                          int64_t tokensQ, int64_t tokensKV, const TokenPermutation& perm) {
  std::vector<float> values(map.begin(), map.end());
  std::vector<float> out = blockValuesInCaptureOrder(values, nq, nk, g, tokensQ, tokensKV, perm);
  for (float& v : out) v = std::min(1.0f, v);  // rounding of the shares must not pass 1
  return out;
}

std::vector<float> blockValuesInCaptureOrder(const std::vector<float>& map, int nq, int nk, const Geometry& g,
                                             int64_t tokensQ, int64_t tokensKV,
                                             const TokenPermutation& perm) {
  if (map.size() != size_t(nq) * size_t(nk) || ceilDiv(tokensQ, g.blockQ) != nq ||
      ceilDiv(tokensKV, g.blockK) != nk)
    throw Error("block map", "the map does not match the entry's tokens and tile geometry");
  // value(r, c) = Σ_{i,j} shareQ(r, i) · map(i, j) · shareK(c, j): the token pairs of capture tile (r, c)
  // are the products of its query and key shares, each pair lying in exactly one permuted block.
  const std::vector<float> sq = tileShares(tokensQ, g.blockQ, nq, perm.q);
  const std::vector<float> sk = tileShares(tokensKV, g.blockK, nk, perm.kv);
  std::vector<float> rowsMapped(size_t(nq) * size_t(nk), 0.0f);  // Σ_i shareQ(r, i) · map(i, j)
  for (int r = 0; r < nq; ++r)
    for (int i = 0; i < nq; ++i) {
      const float s = sq[size_t(r) * nq + i];
      if (s == 0.0f) continue;
      for (int j = 0; j < nk; ++j)
        if (const float m = map[size_t(i) * nk + j]; std::isfinite(m))
          rowsMapped[size_t(r) * nk + j] += s * m;
    }
  std::vector<float> out(size_t(nq) * size_t(nk), 0.0f);
  for (int r = 0; r < nq; ++r)
    for (int c = 0; c < nk; ++c) {
      float v = 0.0f;
      for (int j = 0; j < nk; ++j) v += rowsMapped[size_t(r) * nk + j] * sk[size_t(c) * nk + j];
      out[size_t(r) * nk + c] = v;
    }
  return out;
}

}  // namespace sparge::core
