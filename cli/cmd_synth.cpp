// `sparge synth OUT.h5`: writes a seeded synthetic capture with known structure (tests, benchmarks).
#include <algorithm>
#include <cstdio>
#include <deque>
#include <future>

#include "commands.h"
#include "guards.h"
#include "option_checks.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/core/memory_guard.h"
#include "sparge/core/names.h"
#include "sparge/core/parallel.h"
#include "sparge/core/synthetic.h"

namespace sparge::cli {
namespace {

struct SynthOptions {
  std::string out;
  core::SynthSpec spec;
  int entries = 1;
  std::string dtype = "float16";
  std::string layout = "HND";
  int threads = 0;
  bool compress = false;
  std::string maxMemory;
  std::string grid;  // "T,H,W": an image / video entry
  int64_t gridOffset = 0;
};

void addStructureOptions(CLI::App& cmd, SynthOptions& o) {
  cmd.add_option(
         "--outlier-heads", o.spec.outlierKvHeads,
         "KV heads with outlier keys: K channel 0 = ±--outlier-value, Q channel 0 = 0 (exact attention "
         "unchanged, INT8 Q·Kᵀ much worse); comma separated")
      ->delimiter(',');
  cmd.add_option("--outlier-value", o.spec.outlierValue, "Magnitude of the outlier keys")
      ->check(realIn(0, 60000))
      ->capture_default_str();
  cmd.add_option(
      "--grid", o.grid,
      "An image / video entry on a T,H,W token grid (after --grid-offset prompt tokens): Q and K smooth "
      "in the position plus noise, stored in row-major (t, h, w) order; --tokens is then T·H·W + offset");
  cmd.add_option("--grid-offset", o.gridOffset, "Prompt tokens before the grid (with --grid)")
      ->check(integerIn(0, core::kMaxDimension))
      ->capture_default_str();
  cmd.add_option("--length-scale", o.spec.lengthScale,
                 "With --grid: cells along h and w over which Q and K stay alike")
      ->check(realIn(1e-6, 1e9))
      ->capture_default_str();
  cmd.add_option("--frame-length-scale", o.spec.frameLengthScale,
                 "With --grid: frames over which Q and K stay alike")
      ->check(realIn(1e-6, 1e9))
      ->capture_default_str();
  cmd.add_option("--noise", o.spec.noise, "With --grid: noise relative to the smooth part")
      ->check(realIn(0, 1e9))
      ->capture_default_str();
}

void addSynthOptions(CLI::App& cmd, SynthOptions& o) {
  const CLI::Validator dimension = integerIn(1, core::kMaxDimension);
  cmd.add_option("out", o.out, "Output capture (.h5)")->required();
  cmd.add_option("--entries", o.entries, "Number of entries (layers)")
      ->check(integerIn(1, 100000))
      ->capture_default_str();
  cmd.add_option("--batch", o.spec.batch, "Batch size")->check(dimension)->capture_default_str();
  cmd.add_option("--heads", o.spec.headsQ, "Query heads")->check(dimension)->capture_default_str();
  cmd.add_option("--kv-heads", o.spec.headsKV, "KV heads (default: = heads)")->check(dimension);
  cmd.add_option("--tokens", o.spec.tokensQ, "Query tokens")->check(dimension)->capture_default_str();
  cmd.add_option("--kv-tokens", o.spec.tokensKV, "KV tokens (default: = tokens)")->check(dimension);
  cmd.add_option("--dim", o.spec.headDim, "Head dim of q/k (and v unless --dim-v)")
      ->check(dimension)
      ->capture_default_str();
  cmd.add_option("--dim-v", o.spec.headDimV, "Head dim of v")->check(dimension);
  cmd.add_flag("--causal", o.spec.causal, "Mark entries causal");
  cmd.add_option("--dtype", o.dtype, "float16 | bfloat16 | float32")->capture_default_str();
  cmd.add_option("--layout", o.layout, "HND | NHD")->capture_default_str();
  cmd.add_option("--segment", o.spec.segment, "Tokens per attention segment")
      ->check(dimension)
      ->capture_default_str();
  cmd.add_option("--sharpness", o.spec.sharpness, "Logit gap multiplier, in [0, 1000]")
      ->check(realIn(0, core::kMaxSharpness))
      ->capture_default_str();
  cmd.add_option("--seed", o.spec.seed, "Random seed (0 … 2^64 − 1)")->capture_default_str();
  cmd.add_flag("--compress", o.compress,
               "Gzip the tensors (random data hardly compresses; off, writing and every later read are "
               "several times faster)");
  addStructureOptions(cmd, o);
  addThreadsOption(cmd, o.threads, "Entries generated at once");
  addMaxMemoryOption(cmd, o.maxMemory);
}

// The spec the options describe, checked as a whole (tensor sizes, heads a multiple of kv-heads); throws
// sparge::Error naming the option.
core::SynthSpec checkedSpec(const SynthOptions& o, const CLI::App& cmd) {
  core::SynthSpec spec = o.spec;
  if (cmd.count("--kv-heads") == 0) spec.headsKV = spec.headsQ;
  if (cmd.count("--kv-tokens") == 0) spec.tokensKV = spec.tokensQ;
  if (cmd.count("--dim-v") == 0) spec.headDimV = spec.headDim;
  if (o.dtype == "float16" || o.dtype == "fp16")
    spec.dtype = core::DType::Float16;
  else if (o.dtype == "bfloat16" || o.dtype == "bf16")
    spec.dtype = core::DType::BFloat16;
  else if (o.dtype == "float32" || o.dtype == "fp32")
    spec.dtype = core::DType::Float32;
  else
    throw Error("--dtype",
                "unknown dtype '" + core::shortForDisplay(o.dtype) + "': use float16, bfloat16 or float32");
  if (o.layout == "HND")
    spec.layout = core::Layout::HND;
  else if (o.layout == "NHD")
    spec.layout = core::Layout::NHD;
  else
    throw Error("--layout", "unknown layout '" + core::shortForDisplay(o.layout) + "': use HND or NHD");
  if (!o.grid.empty()) {
    spec.grid = core::parseGridShape(o.grid, "--grid");
    spec.grid->offset = o.gridOffset;
  } else if (cmd.count("--grid-offset")) {
    throw Error("--grid-offset", "needs --grid");
  }
  if (const core::SynthProblem p = core::synthSpecProblem(spec); !p.field.empty()) {
    std::string options = "--" + p.field;  // "batch/heads" -> "--batch/--heads"
    for (size_t at = options.find('/'); at != std::string::npos; at = options.find('/', at + 3))
      options.insert(at + 1, "--");
    throw Error(options, p.problem);
  }
  return spec;
}

// How many entries are generated at once: --threads, fewer when the memory holds fewer (at least one,
// which must fit: else an error that says how much one needs).
int entriesInFlight(const core::SynthSpec& spec, int entries, int threads, const std::string& out) {
  core::MemoryEstimate one;
  one.entryBytes = core::syntheticEntryBytes(spec);
  core::checkMemory(one, "synth " + core::shortForDisplay(out),
                    "lower --batch, --heads, --tokens or --dim, or raise the limit with --max-memory SIZE "
                    "if you know it fits");
  const double budget = core::memoryBudgetBytes();
  int inFlight = std::min(entries, threads);
  while (inFlight > 1 && budget >= 0 && double(inFlight) * one.entryBytes > budget) --inFlight;
  return inFlight;
}

int writeSynthetic(const SynthOptions& o, const core::SynthSpec& spec) {
  checkOutputs({{"out", o.out}}, {});  // before generating the data
  applyMaxMemory(o.maxMemory);
  const int threads =
      entriesInFlight(spec, o.entries, core::usableThreads(usableThreadsNoted(o.threads)), o.out);
  auto make = [spec](int i) {
    core::SynthSpec s = spec;
    s.seed = spec.seed + uint64_t(i) * 7919;
    char name[32];
    std::snprintf(name, sizeof name, "l%02d", i);
    s.name = name;
    core::EntryData e = core::makeSyntheticEntry(s);
    e.info.layer = i;
    return e;
  };
  // Entries are generated on several threads (each from its own seed, so the data does not depend on
  // the thread count), at most `threads` in memory at once, and written in order.
  core::writeAtomically(o.out, [&](const std::string& tmp) {
    core::CaptureWriter w(
        tmp, o.compress ? core::CaptureWriter::Compression::Gzip : core::CaptureWriter::Compression::None);
    w.setRootAttribute("source", "sparge synth (synthetic, seeded; not a real model)");
    std::deque<std::future<core::EntryData>> pending;
    int next = 0;
    for (int i = 0; i < o.entries; ++i) {
      for (; next < o.entries && next < i + threads; ++next)
        pending.push_back(core::startAsync([&make, next] { return make(next); }));
      core::EntryData e = pending.front().get();
      pending.pop_front();
      w.addEntry(e.info, e.q, e.k, e.v);
    }
    w.close();
  });
  std::printf("wrote %s (%d entries)\n", core::printable(o.out).c_str(), o.entries);
  return 0;
}

}  // namespace

void registerSynth(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("synth", "Write a synthetic capture with known attention structure");
  auto o = std::make_shared<SynthOptions>();
  addSynthOptions(*cmd, *o);
  cmd->callback([&action, o, cmd] {
    auto spec = std::make_shared<core::SynthSpec>(checkedSpec(*o, *cmd));  // before any work
    action = [o, spec] { return writeSynthetic(*o, *spec); };
  });
}

}  // namespace sparge::cli
