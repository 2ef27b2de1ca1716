// Method options shared by the commands that run the engine (run, and later bench/tune): θ, τ | top-k,
// λ, geometry, smooth-k, sink, engine, threads, heads.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sparge/core/params.h"

namespace sparge::cli {

struct RunCommandOptions {
  std::string file;
  std::vector<std::string> entries;
  double theta = 0.6;   // SpargeAttn CDF API defaults
  std::optional<double> tau;
  std::optional<double> topk;
  double lambda = 50.0;
  std::string block = "128x64";
  bool noSmoothK = false;
  bool sink = false;
  bool dense = false;
  std::string engine = "auto";
  int threads = 0;
  std::vector<int64_t> heads;
  std::string paramsPath;
  std::string masksPath;
  std::string reportPath;
  bool summaryOnly = false;
};

void addMethodOptions(CLI::App& cmd, RunCommandOptions& o);

// The run configuration for one entry: command-line values, then per-head values from --params.
core::RunConfig makeRunConfig(const RunCommandOptions& o, const core::EntryInfo& entry, const std::string& capturePath);

}  // namespace sparge::cli
