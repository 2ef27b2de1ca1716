// The auto-tuner: per-head θ / τ (or top-k) / λ search against an L1 error budget, all heads of an entry
// probed in lockstep (one Engine::run per probe). The search is described in docs/method.md ("Tuner search").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sparge/core/engine.h"
#include "sparge/core/params.h"
#include "sparge/core/result.h"
#include "sparge/core/tune_decision.h"
#include "sparge/core/types.h"

namespace sparge::core {

// λ used while τ / top-k is searched: large enough that no block is ever PV-skipped (the skip needs a
// score drop of 1e30 in base-2 units), yet finite so that validate() accepts it and float32 holds it.
inline constexpr double kNoPvSkipLambda = 1e30;

// θ grid of upstream: −1, −15/16, …, 15/16 (32 values).
std::vector<double> defaultThetaGrid();

// Which heads are tuned (and deployed) in exact numerics because quantization alone breaks the budget: their
// dense L1 in the tuned numerics (l1_quant, max over the entries tuned together) reaches l1, so no θ, τ, λ
// can meet it there. Head: those heads; Entry: every head of an entry that has one; Layer: every head of
// every entry of that layer (entries with the same `layer` attribute). Off: they stay in the tuned numerics
// (and come out dense).
enum class ExactFallback : uint8_t { Off, Head, Entry, Layer };
const char* toString(ExactFallback f);                      // "off" | "head" | "entry" | "layer"
ExactFallback parseExactFallback(const std::string& text);  // throws sparge::Error naming the accepted values

struct TuneOptions {
  // The block predictor tuned (docs/methods.md). For the methods other than SpargeAttn the tuner bisects the
  // method's knob (method_knob.h) instead of sweeping θ; `methodBase` holds their other parameters
  // (XAttention's stride, FlexPrefill's τ and budgets; MInference's pattern is chosen per head).
  Method method = Method::SpargeAttn;
  HeadParams methodBase;
  double l1 = 0.05;                   // budget for θ and τ / top-k (PV skip off): L1 < l1
  double l2 = 0.06;                   // budget for λ: L1 < l2 (must be > l1 when tunePv)
  SelectMode mode = SelectMode::Cdf;  // Cdf: search τ; TopK: search the top-k fraction
  bool tunePv = true;                 // search λ; otherwise λ = fixedLambda (verified against l1)
  double fixedLambda = 50.0;          // λ exported when tunePv is off (upstream's API default)
  std::vector<double> thetaGrid = defaultThetaGrid();  // swept in ascending order
  double selTolerance = 0.001;  // bisection stops when the τ / top-k interval is below this
  double lambdaMin = 0.0, lambdaMax = 50.0;
  double lambdaTolerance = 0.1;
  double minSparsity = 0.1;        // is_sparse cut: stage-1 sparsity <= this → dense head
  double earlyStopSparsity = 0.1;  // stop the θ sweep once a θ's stage-1 sparsity is below this
  double binStart = -1.0, binWidth = 2.0 / 16;  // bin rule for entries tuned together
  int fallbackTries = 3;                        // group mode: single points re-evaluated when the bin fails
  Geometry geometry = kGeometry128x64;
  Numerics numerics =
      Numerics::None;  // every probe runs in these numerics: the budgets bound the deployed L1
  bool smoothK = true;
  bool sink = false;
  bool diagonal = false;       // extension, not SpargeAttn's: every probe keeps the diagonal blocks on
  ExactFallback exactFallback = ExactFallback::Off;  // with quantized numerics (the CLI's default: Head)
  std::vector<int64_t> heads;  // query heads to tune; empty = all

  // Throws sparge::Error naming `where` for out-of-range values (l1 <= 0, l2 <= l1 with tunePv, …).
  void validate(const std::string& where) const;
};

enum class ProbePhase : uint8_t {
  Select,  // θ sweep with τ / top-k bisection, PV skip off
  Verify,  // combined (bin-rule) or fallback candidate re-evaluated, PV skip off
  Lambda,  // λ bisection
  Final,   // verification of the exported parameters (fixed λ, dense head, λ fallback)
};
const char* toString(ProbePhase p);

// One engine evaluation of one head (figures summed over batch items).
struct TuneProbe {
  int32_t entry = 0;  // index into TunedGroup::entries
  ProbePhase phase = ProbePhase::Select;
  bool dense = false;
  float theta = 0, sel = 0;     // sel = τ (CDF mode) or top-k fraction
  float lambda = 0;             // kNoPvSkipLambda while PV skip is off
  float stage1 = 0, total = 0;  // sparsity (block counts, exact causal denominators)
  float l1 = 0;
  bool pass = false;  // L1 below the budget of its phase (l1, or l2 for λ)
};

// Result of one θ of the sweep on one entry: the best passing τ / top-k found for it.
struct ThetaPoint {
  int32_t entry = 0;
  double theta = 0;
  bool passed = false;  // some probe met l1 at this θ
  double sel = 1.0;     // best passing τ / top-k (1.0 when none passed)
  double stage1 = 0;    // its stage-1 sparsity (0 when none passed)
  double l1 = 0;        // its L1
  int probes = 0;       // probes spent on this θ (0 when reused)
  // θ whose masks are identical (same self-similar blocks), whose search result was reused; NaN if none.
  double reusedFrom = std::numeric_limits<double>::quiet_NaN();
};

// Achieved figures of the exported parameters on one entry, measured in an evaluated run.
struct EntryAchieved {
  std::string entry;
  double stage1 = 0, total = 0, l1 = 0;
};

struct TunedHead {
  int64_t head = 0;   // query head
  HeadParams params;  // exported: θ, τ or top-k, λ, dense (= !isSparse)
  bool isSparse = true;
  bool exact = false;  // tuned and to be deployed in exact numerics (ExactFallback), not the options'
  // Measured with exactly `params` (single entry: the chosen probe; group: mean sparsity, max L1).
  double stage1Sparsity = 0;
  double totalSparsity = 0;
  double l1 = 0;                     // deployed (the budgeted figure), in `numerics`
  double l1Sparse = 0, l1Quant = 0;  // the same run in exact numerics; dense in the options' numerics
  // Dense with INT8 Q·Kᵀ and fp32 P·V (l1Quant's Q·Kᵀ part); NaN when not measured.
  double l1QuantQk = std::numeric_limits<double>::quiet_NaN();
  std::vector<EntryAchieved> perEntry;  // one per entry of the group
  int probes = 0;                       // engine evaluations of this head
  std::vector<ThetaPoint> thetaPoints;
  std::vector<TuneProbe> trace;  // every probe, in order
  TuneDecision decision;         // what was chosen and why (describe() renders it as text)
};

// One input a group was tuned on: the capture (path as given), the entry, and its content digest (digest.h).
struct TunedOn {
  std::string capture, entry, digest;
  bool operator==(const TunedOn&) const = default;
};

// One tuned unit: a single entry, or several entries of one layer tuned together (bin rule), from one or
// several captures.
struct TunedGroup {
  std::string name;                  // entry name, or "layer <n>" when grouped
  std::vector<std::string> entries;  // entry names, in tuning order, each once
  std::vector<TunedOn> tunedOn;      // every input, in tuning order (several captures: one per capture)
  std::optional<int64_t> layer;
  int64_t headsQ = 0;
  std::vector<TunedHead> heads;  // finished heads, ordered by head
  bool complete = false;         // every requested head finished
  double elapsedSeconds = 0;

  const TunedHead* find(int64_t head) const;
};

struct TuneResult {
  TuneOptions options;
  std::string engine;
  std::vector<TunedGroup> groups;  // groups started so far (the last may be incomplete)
  bool cancelled = false;
  double elapsedSeconds = 0;
  int64_t probes = 0;  // engine runs (each covers all active heads)

  int64_t headsFinished() const;
};

// An entry to tune, loaded on demand (entries of a group may be loaded more than once; nothing
// beyond the engine's current entry is kept in memory).
struct TuneInput {
  std::string name;
  std::optional<int64_t> layer;
  int64_t headsQ = 0;
  std::function<std::shared_ptr<const EntryData>()> load;
  std::string capture;  // the capture it comes from, as given (tuned_on; empty for an entry in memory)

  static TuneInput fromData(std::shared_ptr<const EntryData> data);
};

struct TuneGroupInput {
  std::string name;
  std::optional<int64_t> layer;
  std::vector<TuneInput> entries;  // one → best single point; several → bin rule
  // ExactFallback::Layer: the entries of the same layer in other groups, whose heads decide too.
  std::vector<TuneInput> layerPeers;
};

// One group per entry name (the same entry of several captures is tuned together), or (byLayer) one group
// per `layer` attribute value, in first-seen order; entries without a layer stay alone. Every group gets the
// other groups' entries of its layer as `layerPeers`.
std::vector<TuneGroupInput> makeGroups(const std::vector<TuneInput>& entries, bool byLayer);

struct TuneProgress {
  int64_t unitsDone = 0;   // (entry, head) pairs finished
  int64_t unitsTotal = 0;  // entries × tuned heads
  double fraction = 0;     // finer estimate in [0, 1] for bars
  double elapsedSeconds = 0;
  double etaSeconds = -1;  // -1 while unknown
  std::string group;       // current group / entry
  ProbePhase phase = ProbePhase::Select;
  int64_t probes = 0;  // engine runs so far
};

// Callbacks run on the thread that called tune() (the GUI's worker), between engine runs.
struct TuneCallbacks {
  std::function<void(const TuneProgress&)> progress;                      // after every engine run
  std::function<void(const TunedGroup&, const TunedHead&)> headFinished;  // as soon as a head is final
  std::function<void(const TunedGroup&)> groupFinished;
  const CancelFlag* cancel = nullptr;  // checked between runs and inside them; finished heads are kept
};

// Tunes the groups in order with `engine` (setEntry is called as needed). Never throws Cancelled:
// a cancelled run returns with cancelled = true and the finished heads. Throws sparge::Error for bad
// options or data.
TuneResult tune(Engine& engine, const std::vector<TuneGroupInput>& groups, const TuneOptions& options,
                const TuneCallbacks& callbacks = {});

// Convenience: one entry already in memory (GUI "tune this head/entry"): options.heads selects heads.
TuneResult tuneEntry(Engine& engine, std::shared_ptr<const EntryData> entry, const TuneOptions& options,
                     const TuneCallbacks& callbacks = {});

// The bin rule for points of several entries (exposed for tests and the GUI).
struct TunePoint {
  double theta = 0, sel = 0, lambda = 0, sparsity = 0;
};
struct BinChoice {
  bool found = false;
  int bin = -1;  // floor((θ − start) / width)
  double binLow = 0, binHigh = 0;
  double theta = 0, sel = 0, lambda = 0;  // max over the bin's points
  double meanSparsity = 0;                // mean over the bin's points
  double sumSparsity = 0;
  int count = 0;
};
// Chooses the bin with the largest summed sparsity (ties: the lowest bin).
BinChoice chooseBin(const std::vector<TunePoint>& points, double start = -1.0, double width = 2.0 / 16);

}  // namespace sparge::core
