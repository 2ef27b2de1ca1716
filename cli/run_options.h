// Options shared by the commands that run the engine (run, tune, compare): θ, τ | top-k, λ, target, geometry,
// numerics, smooth-k, sink, engine, threads, heads, and how the tuner's budgets are read.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "method_options.h"
#include "sparge/core/params.h"
#include "sparge/core/tuner.h"

namespace sparge::cli {

// --target / --block / --quant: the SpargeAttn kernel family a run imitates, and the overrides.
struct NumericsOptions {
  std::string target = "sm89";  // the CLI default: 128x64 tiles, INT8 Q·Kᵀ, FP8 P·V (docs/cli.md, --target)
  std::optional<std::string> block;
  std::optional<std::string> quant;

  // Geometry and numerics: the target's, with --block and --quant taking precedence. Throws sparge::Error
  // naming the option for unknown values.
  core::Geometry geometry() const;
  core::Numerics numerics() const;
};
void addNumericsOptions(CLI::App& cmd, NumericsOptions& o);

struct RunCommandOptions {
  std::string file;
  std::vector<std::string> entries;
  double theta = 0.6;  // SpargeAttn CDF API defaults
  std::optional<double> tau;
  std::optional<double> topk;
  double lambda = 50.0;
  MethodOptions method;  // --method and the other methods' parameters
  NumericsOptions numerics;
  bool noSmoothK = false;
  bool sink = false;
  bool diagonal = false;  // extension: diagonal blocks always on
  bool dense = false;
  std::string engine = "auto";
  int threads = 0;
  std::vector<int64_t> heads;
  std::string paramsPath;
  bool paramsAnyCapture = false;  // apply --params to inputs it was not tuned on (held-out validation)
  std::string permute = "none";   // token order of grid entries (docs/permutation.md)
  std::string masksPath;
  std::string reportPath;
  bool summaryOnly = false;
  int repeat = 1;           // profiled runs per entry
  int warmup = 1;           // extra runs before them (only with --repeat > 1 or --timings), at least
  int warmupMs = 0;         // and extra runs until at least this many milliseconds of them have run
  std::string timingsPath;  // .json | .csv | .trace.json
  bool noDenseBaseline = false;
};

void addMethodOptions(CLI::App& cmd, RunCommandOptions& o);

// The budgets into `t`: --l1, --l2 (required unless λ is not searched; then --l1 bounds it too), whether λ is
// searched and the selection mode. Throws sparge::Error naming a missing --l2.
void applyBudgets(core::TuneOptions& t, double l1, double l2, bool noTunePv, bool topk, const CLI::App& cmd);
// The method options' defaults for every head, checked together (τ or top-k with θ and λ, target, tiles,
// numerics, engine); throws sparge::Error naming the option. Called when the command line is parsed.
core::HeadParams checkMethodOptions(const RunCommandOptions& o);

// --permute: registered by addMethodOptions for run; tune and compare register it themselves.
void addPermuteOption(CLI::App& cmd, std::string& permute);
// The token order for a run of `entry`: --permute, or the parameter file's when --params is given (a note in
// `warnings` when the two differ). Throws sparge::Error when it cannot apply to the entry.
core::Permutation runPermutation(const RunCommandOptions& o, const core::EntryInfo& entry,
                                 std::vector<std::string>* warnings = nullptr);

// The run configuration for one entry: command-line values, then per-head values from --params.
// Warnings (for example settings overridden by the params file) are appended to `warnings`.
core::RunConfig makeRunConfig(const RunCommandOptions& o, const core::EntryInfo& entry,
                              const std::string& capturePath, std::vector<std::string>* warnings = nullptr);

}  // namespace sparge::cli
