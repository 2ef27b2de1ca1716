// Tuned-parameter JSON (format in docs/tuning.md, "The parameter file"): writing tuner results, reading and
// validating them, mapping a file onto RunConfig for an entry (`sparge run --params`), the identity of the
// inputs it was tuned on and held-out figures.
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

// What `sparge tune --validate` found for a head on inputs it was not tuned on.
struct HeldOut {
  int64_t inputs = 0;      // held-out entries the head ran on
  int64_t violations = 0;  // of them, those where its L1 exceeded the deployed budget
  double maxL1 = 0;
  std::string maxL1Entry;  // "<capture>:<entry>"
  bool operator==(const HeldOut&) const = default;
};

// One head as stored in the file.
struct ParamsHead {
  int64_t head = 0;
  HeadParams params;  // θ, τ or top-k, λ; dense = !is_sparse
  bool isSparse = true;
  // Tuned in and to be deployed in exact numerics although the file's are quantized (the exact fallback):
  // the key "numerics": "none"; written only for such heads.
  bool exact = false;
  double stage1Sparsity = 0;  // achieved, as measured by the tuner
  double totalSparsity = 0;
  double l1 = 0;  // deployed: sparse, in the file's numerics
  // Absent (NaN) in files from before the numerics split, or when the tuner did not measure them.
  double l1Sparse = std::numeric_limits<double>::quiet_NaN();  // same parameters in exact numerics
  double l1Quant = std::numeric_limits<double>::quiet_NaN();   // every valid block in the file's numerics
  double l1QuantQk = std::numeric_limits<double>::quiet_NaN();  // the same with INT8 Q·Kᵀ and fp32 P·V
  std::optional<HeldOut> heldOut;
};

// One group: a single entry, or the entries of one layer tuned together.
struct ParamsGroup {
  std::string name;
  std::vector<std::string> entries;
  std::vector<TunedOn> tunedOn;  // the inputs its heads were tuned on; empty in files from before the key
  std::optional<int64_t> layer;
  int64_t headsQ = 0;
  bool complete = true;           // false: tuning was interrupted, only `heads` were finished
  std::vector<ParamsHead> heads;  // ordered by head, unique
  std::optional<TokenGrid> grid;  // with a permutation: the grid of the entries it was tuned on
  std::optional<Method> method;   // "method" of the group; absent: the file's (docs/methods.md)
};

struct ParamsFile;
// The numerics a head of `file` runs in: none for an exact head, else the file's.
Numerics numericsOf(const ParamsFile& file, const ParamsHead& head);

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
  std::optional<ExactFallback> exactFallback;  // unset for files written before the key existed
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
// parseParams refuses a file that lists an entry in two groups, so the match by name is unique.
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

// What `sparge run --params` does: sets config.perHead (and config.perHeadNumerics, where a head's numerics
// differ from the file's) for `info` and, because tuned values are only meaningful under the settings they
// were tuned with, config.geometry / numerics / smoothK / sink / diagonal and method from the file (a warning
// is added for each one that changes the caller's value). Missing heads get config.defaults.
void applyParams(const ParamsFile& file, const std::string& source, const EntryInfo& info, RunConfig& config,
                 std::vector<std::string>* warnings = nullptr);

// Whether a group was tuned on an entry: its `tuned_on` list holds the entry's content digest (digest.h).
enum class ParamsIdentity {
  Matches,
  Foreign,     // tuned on other inputs only
  Unrecorded,  // the group has no tuned_on (a file written before the key existed)
};
ParamsIdentity identityOf(const ParamsGroup& group, const std::string& digest);

// For applying a file to entry `info` of `capture` whose digest is `digest` (`sparge run --params`, the
// GUI): throws sparge::Error naming the file, the entry and what to do when the entry's group was tuned on
// other inputs, unless `anyCapture` (a deliberate transfer, e.g. held-out validation). Otherwise returns a
// note, empty when the group was tuned on this very entry: that the file predates tuned_on, or that the
// parameters run on an input they were not tuned on. No group for the entry: "" (applyParams says so).
std::string checkParamsIdentity(const ParamsFile& file, const std::string& source, const EntryInfo& info,
                                const std::string& capture, const std::string& digest, bool anyCapture);

// The opening words of the note checkParamsIdentity returns for a deliberate transfer; a run's warnings
// carry it, so that whoever gathers results knows which entries were held out.
inline constexpr const char* kHeldOutNote = "held-out: ";

// Held-out validation (`sparge tune --validate`): adds a run of `result` (an entry of `capture` that the
// file's parameters were applied to) to the held_out figures of its group's heads; a violation is an L1
// above the file's deployed budget (l2). No group for the entry: nothing.
void addHeldOut(ParamsFile& file, const EntryResult& result, const std::string& capture);
// Writes the held_out figures of `file`'s heads into the parameter file at `path` (atomically), keeping
// everything else it holds, traces included.
void writeHeldOut(const std::string& path, const ParamsFile& file);

// "A.h5:l00, B.h5:l00" (at most three, then "and N more").
std::string describeTunedOn(const std::vector<TunedOn>& inputs);

// With a permutation: each group records the grid of its first entry (core/src/params_permutation.cpp).
void recordPermutation(ParamsFile& file, Permutation permute, const std::map<std::string, EntryInfo>& infos);
// The token order a run of `info` with this file must use: the file's. Throws sparge::Error (naming `source`)
// when the file is permuted and the entry's grid is absent or differs from the one the group was tuned on.
Permutation permutationFor(const ParamsFile& file, const std::string& source, const EntryInfo& info);

}  // namespace sparge::core
