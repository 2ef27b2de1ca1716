// `sparge bench --engine cpu`: the CPU engine on synthetic entries, per instruction-set variant, numerics and
// case: parameter changes on a viewer-sized entry (what a slider move costs) and first runs with the dense
// reference (what `sparge run` costs). Prints min / median / max per stage and optionally writes JSON.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace sparge::cli {

struct CpuBenchOptions {
  std::string changesEntry = "9x2048x64";    // heads x tokens x head dim, causal: the bundled sample's size
  std::string firstRunEntry = "12x4096x64";  // not causal: `sparge synth --heads 12 --tokens 4096 --dim 64`
  int changes = 30;                          // parameter changes timed per numerics
  int firstRuns = 5;                         // first runs (fresh engine each) per numerics
  int threads = 0;                           // 0: every core
  std::vector<std::string> isa{"all"};       // variants to time: all (every one this CPU runs) or names
  std::vector<std::string> quant{"int8-fp8", "none"};
  std::vector<std::string> cases{"changes", "first-run"};
  std::string json;
};

// Adds the CPU bench's own options to `sparge bench`.
void addCpuBenchOptions(CLI::App& cmd, CpuBenchOptions& o);
int runCpuBench(const CpuBenchOptions& o);

}  // namespace sparge::cli
