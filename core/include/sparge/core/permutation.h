// Token permutations of image and video entries (docs/permutation.md): the grid orders, an entry whose Q, K,
// V rows are reordered before either engine sees them, and the way back to the capture's token order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "sparge/core/capture.h"
#include "sparge/core/result.h"
#include "sparge/core/token_grid.h"

namespace sparge::core {

// The cells of a T × H × W grid in the order `p` visits them: order[i] is the row-major index
// (t·H + h)·W + w of the i-th cell. None and RowMajor give the identity. Deterministic.
std::vector<int64_t> gridOrder(int64_t frames, int64_t height, int64_t width, Permutation p);

// Where each token of an entry goes: q[i] is the capture index of the query at position i of the permuted
// entry, kv[i] the same for keys and values. An empty vector leaves that sequence in the capture's order.
struct TokenPermutation {
  Permutation kind = Permutation::None;
  std::vector<int64_t> q;
  std::vector<int64_t> kv;
};

// What keeps `p` from being applied to `info` ("" when nothing): an entry without a grid, or a causal or
// windowed one, whose masks say which keys a query may see by token position (a permutation would change
// them; image and video attention is bidirectional). None applies to every entry.
std::string permutationProblem(const EntryInfo& info, Permutation p);
// The permutation of `info`'s tokens. Throws sparge::Error(where, permutationProblem) when it cannot apply.
TokenPermutation tokenPermutation(const EntryInfo& info, Permutation p, const std::string& where);

// The permutation that made an entry with this info (info.permutation; empty vectors for None).
TokenPermutation appliedPermutation(const EntryInfo& info);

// `entry` with its Q, K, V rows in the order of `p` (info.permutation records it); the same object for None.
// Throws sparge::Error like tokenPermutation.
std::shared_ptr<const EntryData> permuteEntry(std::shared_ptr<const EntryData> entry, Permutation p,
                                              const std::string& where);

// The permuted entries of one loaded entry, each built once (the GUI switches back and forth).
class PermutedEntries {
 public:
  explicit PermutedEntries(std::shared_ptr<const EntryData> base) : base_(std::move(base)) {}
  const std::shared_ptr<const EntryData>& base() const { return base_; }
  std::shared_ptr<const EntryData> get(Permutation p, const std::string& where);

 private:
  std::shared_ptr<const EntryData> base_;
  std::map<Permutation, std::shared_ptr<const EntryData>> built_;
};

// Rows [n × width] in permuted order back to the capture's order (perm as in TokenPermutation; empty =
// nothing to do).
void restoreRowOrder(std::vector<float>& rows, int64_t width, const std::vector<int64_t>& perm);
// Every HeadResult::output of a run on a permuted entry back to the capture's query order, so that it can be
// compared row by row with a run on the capture itself.
void restoreOutputOrder(EntryResult& result, const TokenPermutation& perm);

// A block map [nq × nk] of a run on a permuted entry, seen in the capture's token order: cell (r, c) covers
// capture queries r·BQ … and keys c·BK … (the same tiling) and holds the fraction of its token pairs whose
// block in the permuted entry is set. A permuted block does not map onto one block of the capture, which is
// why the result is a fraction, computed at token granularity.
std::vector<float> blockMapInCaptureOrder(const std::vector<uint8_t>& map, int nq, int nk, const Geometry& g,
                                          int64_t tokensQ, int64_t tokensKV, const TokenPermutation& perm);
// The same for per-block values (a heat map): each capture-order cell holds the mean over its token pairs of
// the value of the permuted block each pair lies in (non-finite values count as 0).
std::vector<float> blockValuesInCaptureOrder(const std::vector<float>& values, int nq, int nk,
                                             const Geometry& g, int64_t tokensQ, int64_t tokensKV,
                                             const TokenPermutation& perm);

}  // namespace sparge::core
