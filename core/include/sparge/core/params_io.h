// Tuned-parameter JSON (format in README.md, "Auto-tuning"): writing tuner results, reading and validating
// them, and mapping a file onto RunConfig::perHead for an entry (`sparge run --params`).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sparge/core/params.h"
#include "sparge/core/tuner.h"
#include "sparge/core/types.h"

namespace sparge::core {

inline constexpr int kParamsVersion = 1;

// One head as stored in the file.
struct ParamsHead {
  int64_t head = 0;
  HeadParams params;  // θ, τ or top-k, λ; dense = !is_sparse
  bool isSparse = true;
  double stage1Sparsity = 0;  // achieved, as measured by the tuner
  double totalSparsity = 0;
  double l1 = 0;  // deployed: sparse, in the file's numerics
  // Absent (NaN) in files from before the numerics split, or when the tuner did not measure them.
  double l1Sparse = std::numeric_limits<double>::quiet_NaN();  // same parameters in exact numerics
  double l1Quant = std::numeric_limits<double>::quiet_NaN();   // every valid block in the file's numerics
};

// One group: a single entry, or the entries of one layer tuned together.
struct ParamsGroup {
  std::string name;
  std::vector<std::string> entries;
  std::optional<int64_t> layer;
  int64_t headsQ = 0;
  bool complete = true;           // false: tuning was interrupted, only `heads` were finished
  std::vector<ParamsHead> heads;  // ordered by head, unique
  std::optional<TokenGrid> grid;  // with a permutation: the grid of the entries it was tuned on
  std::optional<Method> method;   // "method" of the group; absent: the file's (docs/methods.md)
};

struct ParamsFile {
  int version = kParamsVersion;
  // The block predictor (docs/methods.md): top-level "method", absent in SpargeAttn files (older ones too).
  Method method = Method::SpargeAttn;
  std::string capture;  // provenance (may be empty)
  std::string engine;
  SelectMode mode = SelectMode::Cdf;
  double l1 = 0, l2 = 0;
  bool tunePv = true;
  Geometry geometry = kGeometry128x64;
  Numerics numerics = Numerics::None;  // the numerics whose deployed L1 was budgeted ("none" in older files)
  bool smoothK = true;
  bool sink = false;
  bool diagonal = false;  // extension (not SpargeAttn's); optional in the file, default false
  // Top-level "complete": false while tuning runs (checkpoints) and after it was interrupted; unset
  // for files written before the key existed.
  std::optional<bool> complete;
  // The token order the parameters were tuned in ("permute"; absent = none); docs/permutation.md.
  Permutation permute = Permutation::None;
  std::vector<ParamsGroup> groups;
};

// Converts tuner output (finished heads only) to the file model.
ParamsFile toParamsFile(const TuneResult& result, const std::string& capturePath);

// JSON text. With `traceSource` (the TuneResult the file came from), each head also gets its θ points
// and probe trace under "trace" (large; for inspection only; ignored by parseParams).
std::string paramsToJson(const ParamsFile& file, const TuneResult* traceSource = nullptr);
// Writes atomically (temp file + rename).
void writeParams(const std::string& path, const ParamsFile& file, const TuneResult* traceSource = nullptr);

// Parses and validates everything; errors are sparge::Error with where = "<source>:<json path>"
// (for example "p.json:/groups/0/heads/3/cdfthreshd") for bad values, missing keys, wrong types,
// duplicate or out-of-range heads, an unknown version or mode.
ParamsFile parseParams(const std::string& text, const std::string& source);
ParamsFile readParams(const std::string& path);

// The group for an entry: matched by entry name first, else by `layer` (when given); nullptr if none.
const ParamsGroup* findGroup(const ParamsFile& file, const std::string& entryName,
                             std::optional<int64_t> layer);

// The method of group `g` of `file`: its own "method", else the file's.
inline Method methodOf(const ParamsFile& file, const ParamsGroup& g) {
  return g.method.value_or(file.method);
}

// Per-query-head parameters for an entry with `headsQ` heads. Throws sparge::Error (naming `source`)
// when no group matches or the group's head count differs. Heads missing from an incomplete group
// get `fallback` and one line in `warnings` (if given).
std::vector<HeadParams> headParamsFor(const ParamsFile& file, const std::string& source,
                                      const std::string& entryName, std::optional<int64_t> layer,
                                      int64_t headsQ, const HeadParams& fallback = HeadParams{},
                                      std::vector<std::string>* warnings = nullptr);

// What `sparge run --params` does: sets config.perHead for `info` and, because tuned values are only
// meaningful under the settings they were tuned with, config.geometry / numerics / smoothK / sink / diagonal
// and method from the file (a warning is added for each one that changes the caller's value). Missing heads
// get config.defaults.
void applyParams(const ParamsFile& file, const std::string& source, const EntryInfo& info, RunConfig& config,
                 std::vector<std::string>* warnings = nullptr);

// With a permutation: each group records the grid of its first entry (core/src/params_permutation.cpp).
void recordPermutation(ParamsFile& file, Permutation permute, const std::map<std::string, EntryInfo>& infos);
// The token order a run of `info` with this file must use: the file's. Throws sparge::Error (naming `source`)
// when the file is permuted and the entry's grid is absent or differs from the one the group was tuned on.
Permutation permutationFor(const ParamsFile& file, const std::string& source, const EntryInfo& info);

}  // namespace sparge::core
