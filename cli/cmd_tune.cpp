// `sparge tune [FILE] --l1 X --l2 Y -o params.json`: per-head auto-tuning with a progress bar, a summary
// table and Ctrl-C handling (the first SIGINT or SIGTERM stops after keeping the finished heads; exit 130).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "commands.h"
#include "format.h"
#include "guards.h"
#include "held_out.h"
#include "job_support.h"
#include "option_checks.h"
#include "run_options.h"
#include "sparge/core/capture.h"
#include "sparge/core/dense_hint.h"
#include "sparge/core/digest.h"
#include "sparge/core/error.h"
#include "sparge/core/method_knob.h"
#include "sparge/core/names.h"
#include "sparge/core/params_io.h"
#include "sparge/core/permutation.h"
#include "sparge/core/tuner.h"
#include "tune_job.h"

namespace sparge::cli {

using scaleout::jobTransport;
using scaleout::runTuneJob;
using scaleout::TuneJobOutput;
using scaleout::TuneJobSpec;
namespace {

core::CancelFlag gCancel{false};
std::atomic<int> gSignals{0};

extern "C" void onStopSignal(int sig) {
  // Only async-signal-safe work here: set the flag; a second signal falls back to the default action.
  gCancel.store(true);
  if (gSignals.fetch_add(1) >= 1) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

// Installs the handler for SIGINT (Ctrl-C) and SIGTERM (kill, service managers) for the lifetime of the
// command and restores the previous ones afterwards.
class StopSignalGuard {
 public:
  StopSignalGuard() {
    gCancel.store(false);
    gSignals.store(0);
    struct sigaction sa {};
    sa.sa_handler = onStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, &oldInt_);
    sigaction(SIGTERM, &sa, &oldTerm_);
  }
  ~StopSignalGuard() {
    sigaction(SIGINT, &oldInt_, nullptr);
    sigaction(SIGTERM, &oldTerm_, nullptr);
  }

 private:
  struct sigaction oldInt_ {};
  struct sigaction oldTerm_ {};
};

std::string fmtSeconds(double s) {
  if (s < 0) return "?";
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, (int(s) / 60) % 60);
  return buf;
}

// Progress on stderr: a redrawn bar on a terminal, plain lines (one per finished head) otherwise.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(fileno(stderr)) != 0) {}

  void update(const core::TuneProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (tty_) {
      if (now - last_ < std::chrono::milliseconds(100) && p.fraction < 1.0) return;
      last_ = now;
      const int width = 30;
      const int fill = int(p.fraction * width + 0.5);
      std::fprintf(stderr, "\r\033[K[%s%s] %3.0f%%  %lld/%lld heads  %s  elapsed %s  ETA %s  (%s, %lld runs)",
                   std::string(size_t(fill), '#').c_str(), std::string(size_t(width - fill), '.').c_str(),
                   p.fraction * 100.0, (long long)p.unitsDone, (long long)p.unitsTotal, p.group.c_str(),
                   fmtSeconds(p.elapsedSeconds).c_str(), fmtSeconds(p.etaSeconds).c_str(),
                   core::toString(p.phase), (long long)p.probes);
      std::fflush(stderr);
      drawn_ = true;
    } else if (p.unitsDone != lastUnits_ || p.fraction >= lastFraction_ + 0.1) {
      // Not a terminal (log file, CI): a line per finished head, and at least every 10%.
      lastUnits_ = p.unitsDone;
      lastFraction_ = p.fraction;
      std::fprintf(stderr, "tune: %lld/%lld heads  %.0f%%  %s  elapsed %s  ETA %s\n", (long long)p.unitsDone,
                   (long long)p.unitsTotal, p.fraction * 100.0, p.group.c_str(),
                   fmtSeconds(p.elapsedSeconds).c_str(), fmtSeconds(p.etaSeconds).c_str());
    }
  }

  // Clears the bar before other output goes to the terminal.
  void clear() {
    if (tty_ && drawn_) {
      std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
      drawn_ = false;
    }
  }

 private:
  bool tty_;
  bool drawn_ = false;
  int64_t lastUnits_ = -1;
  double lastFraction_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

// Per group, the heads whose quantization alone reaches l1, with which part of the quantization costs what:
// when the INT8 Q·Kᵀ part alone stays below l1, the P·V numerics are the cause and the sm80 path (fp16 P·V)
// may keep such a head quantized.
void printQuantNotes(const core::TunedGroup& g, const core::TuneOptions& o) {
  std::string exact, over;
  for (const core::TunedHead& h : g.heads) {
    if (!std::isfinite(h.l1Quant) || h.l1Quant < o.l1) continue;
    std::string item = std::to_string(h.head) + " (" + fmtNum(h.l1Quant, 3);
    if (std::isfinite(h.l1QuantQk)) item += ", INT8 Q·Kᵀ alone " + fmtNum(h.l1QuantQk, 3);
    item += ")";
    std::string& list = h.exact ? exact : over;
    list += (list.empty() ? "" : ", ") + item;
  }
  const char* numerics = core::toString(o.numerics);
  if (!exact.empty())
    std::printf("exact fallback: head(s) %s: dense L1 in %s reaches l1 %g, tuned in exact numerics\n",
                exact.c_str(), numerics, o.l1);
  if (!over.empty())
    std::printf(
        "note: head(s) %s cannot meet l1 < %g in %s: quantization alone (dense L1) already costs that much "
        "(--exact-fallback head tunes them in exact numerics)\n",
        over.c_str(), o.l1, numerics);
  std::string pvOnly;
  for (const core::TunedHead& h : g.heads)
    if (std::isfinite(h.l1Quant) && h.l1Quant >= o.l1 && std::isfinite(h.l1QuantQk) && h.l1QuantQk < o.l1)
      pvOnly += (pvOnly.empty() ? "" : ", ") + std::to_string(h.head);
  if (!pvOnly.empty() && o.numerics == core::Numerics::Int8Fp8)
    std::printf(
        "note: head(s) %s: INT8 Q·Kᵀ alone stays below l1, so FP8 P·V is what breaks it; the sm80 path "
        "(--target sm80: INT8 Q·Kᵀ, fp16 P·V) may keep them quantized\n",
        pvOnly.c_str());
}

void printGroup(const core::TunedGroup& g, const core::TuneOptions& o) {
  std::printf("\n%s  (%zu entr%s, %zu input%s, %zu/%lld heads, %.1f s)\n",
              core::shortForDisplay(g.name).c_str(), g.entries.size(), g.entries.size() == 1 ? "y" : "ies",
              g.tunedOn.size(), g.tunedOn.size() == 1 ? "" : "s", g.heads.size(), (long long)g.headsQ,
              g.elapsedSeconds);
  const bool cdf = o.mode == core::SelectMode::Cdf;
  const bool quant = o.numerics != core::Numerics::None;
  // L1 is the budgeted, deployed figure; without quantization the sparse-only L1 equals it.
  auto split = [&](double v) { return quant && std::isfinite(v) ? fmtNum(v, 5) : std::string("-"); };
  const bool sparge = o.method == core::Method::SpargeAttn;
  Table t({"head", sparge ? "θ" : core::methodLabel(o.method), sparge ? (cdf ? "τ" : "topk") : "", "λ",
           "sparse?", "numerics", "stage1", "sparsity", "L1", "L1 sparse", "L1 quant", "L1 quant Q·Kᵀ",
           "probes"});
  for (const core::TunedHead& h : g.heads) {
    const auto& p = h.params;
    const std::string lambda = p.lambda >= core::kNoPvSkipLambda ? "off" : fmtNum(p.lambda, 2);
    t.row({std::to_string(h.head), sparge ? fmtNum(p.theta, 4) : core::describeMethodParams(o.method, p),
           sparge ? fmtNum(cdf ? p.tau : p.topk, 4) : "", lambda, h.isSparse ? "yes" : "dense",
           core::toString(h.exact ? core::Numerics::None : o.numerics), fmtPct(h.stage1Sparsity),
           fmtPct(h.totalSparsity), fmtNum(h.l1, 5), split(h.l1Sparse), split(h.l1Quant), split(h.l1QuantQk),
           std::to_string(h.probes)});
  }
  t.print(std::cout);
  // Why each head got its values: the tuner's decision, rendered here.
  for (const core::TunedHead& h : g.heads)
    std::printf("  head %lld: %s\n", (long long)h.head, core::describe(h.decision).c_str());
  if (quant) printQuantNotes(g, o);
  std::fflush(stdout);
}

struct TuneCliOptions {
  std::vector<std::string> files;
  std::vector<std::string> entries;
  double l1 = 0;
  double l2 = 0;
  std::string engine = "auto";
  int threads = 0;
  bool topk = false;
  MethodOptions method;  // --method and the other methods' fixed parameters (the tuner searches the knob)
  NumericsOptions numerics;
  bool noSmoothK = false;
  bool sink = false;
  bool diagonal = false;
  bool groupByLayer = false;
  bool noTunePv = false;
  std::string exactFallback = "head";
  std::vector<std::string> validate;
  std::vector<int64_t> heads;
  std::string out;
  std::string resume;
  bool trace = false;
  std::string maxMemory;
  std::string permute = "none";
};

void addTuneOptions(CLI::App& cmd, TuneCliOptions& o) {
  addMaxMemoryOption(cmd, o.maxMemory);
  cmd.add_option(
      "files", o.files,
      "Capture file(s) (.h5); several: each head's parameters meet the budget on all of them (entries "
      "matched by name); default: the bundled sample capture");
  cmd.add_option("--l1", o.l1, "L1 budget for θ and τ / top-k (PV skip off), e.g. 0.05")
      ->required()
      ->check(realIn(0, DBL_MAX));
  cmd.add_option("--l2", o.l2, "L1 budget for λ (PV skip on), > l1, e.g. 0.06")->check(realIn(0, DBL_MAX));
  cmd.add_option("--entry", o.entries, "Entry to tune (repeatable); default: all entries");
  cmd.add_option("--engine", o.engine, "auto | cpu | cuda")->capture_default_str();
  addThreadsOption(cmd, o.threads, "CPU engine threads");
  cmd.add_flag("--topk-mode", o.topk,
               "Search the top-k fraction instead of τ (spas_sage2_attn_meansim_topk_cuda)");
  addMethodChoiceOptions(cmd, o.method, false);
  addNumericsOptions(cmd, o.numerics);
  cmd.add_flag("--no-smooth-k", o.noSmoothK, "Do not subtract the K token mean before pooling");
  cmd.add_flag("--sink", o.sink, "Attention sink: K block 0 always on");
  cmd.add_flag("--diagonal", o.diagonal,
               "Extension, not SpargeAttn's: the diagonal blocks (those holding key == query) always on in "
               "every probe; the parameter file records it");
  cmd.add_flag("--group-by-layer", o.groupByLayer,
               "Tune entries sharing a `layer` attribute together (bin rule, one parameter set per layer)");
  cmd.add_flag("--no-tune-pv", o.noTunePv, "Do not search λ; export λ = 50 verified against --l1");
  cmd.add_option(
         "--exact-fallback", o.exactFallback,
         "Heads whose dense L1 in the chosen numerics (quantization alone) reaches --l1 are tuned and "
         "recorded in exact numerics: off | head | entry (every head of such an entry) | layer (every "
         "head of such a layer)")
      ->capture_default_str();
  cmd.add_option(
         "--validate", o.validate,
         "Held-out capture (repeatable): after tuning, run the parameters on it and record per head the "
         "budget violations (\"held_out\" in the parameter file)")
      ->check(existingFile());
  addHeadsOption(cmd, o.heads, "Query heads to tune (default: all)");
  cmd.add_option("-o,--output", o.out, "Output parameter file (.json); default with --resume: that file");
  cmd.add_option("--resume", o.resume,
                 "Keep the heads this parameter file already holds (an interrupted or failed run) and tune "
                 "only the missing ones")
      ->check(existingFile());
  cmd.add_flag("--trace", o.trace, "Also store every head's θ points and probe trace in the output");
  addPermuteOption(cmd, o.permute);
}

// The tuner's options from the command line, checked when it is parsed; throws sparge::Error naming the
// option when one is missing or out of range.
core::TuneOptions tuneOptionsFrom(const TuneCliOptions& o, const CLI::App& cmd) {
  core::TuneOptions opt;
  applyBudgets(opt, o.l1, o.l2, o.noTunePv, o.topk, cmd);
  opt.method = o.method.parsed();
  if (opt.method != core::Method::SpargeAttn && o.topk)
    throw Error("--topk-mode", std::string("is SpargeAttn's; --method ") + core::toString(opt.method) +
                                   " searches its own knob");
  o.method.apply(opt.method, opt.methodBase);
  opt.geometry = o.numerics.geometry();
  opt.numerics = o.numerics.numerics();
  opt.smoothK = !o.noSmoothK;
  opt.sink = o.sink;
  opt.diagonal = o.diagonal;
  opt.exactFallback = core::parseExactFallback(o.exactFallback);
  opt.heads = o.heads;
  opt.validate("--l1/--l2");
  if (o.out.empty() && o.resume.empty()) throw Error("-o/--output", "is required (or --resume FILE)");
  core::parseEngineChoice(o.engine);
  return opt;
}

// One tuner input per entry, loading its data lazily (the job checks the memory first) and warning once
// per entry about NaN/Inf values.
std::vector<core::TuneInput> tuneInputs(core::CaptureReader& reader, const std::vector<std::string>& names,
                                        const std::vector<int64_t>& heads, const std::string& path,
                                        core::Permutation permute) {
  std::vector<core::TuneInput> inputs;
  // Loaders may run on a prefetching thread beside the main one: the set of warned entries is shared.
  struct Warned {
    std::mutex mutex;
    std::set<std::string> entries;
  };
  auto warned = std::make_shared<Warned>();
  for (const auto& n : names) {
    const core::EntryInfo& info = reader.entry(n);  // fails early on a misspelt entry
    if (std::string problem = core::permutationProblem(info, permute); !problem.empty())
      throw Error("--permute", problem);
    for (int64_t h : heads)
      if (h < 0 || h >= info.headsQ)
        throw Error("--heads", "head " + std::to_string(h) + " out of range for entry " +
                                   core::shortForDisplay(n) + " (" + std::to_string(info.headsQ) +
                                   " query heads)");
    core::TuneInput in;
    in.name = n;
    in.capture = path;
    in.layer = info.layer;
    in.headsQ = info.headsQ;
    in.load = [&reader, n, path, warned, permute] {
      std::vector<core::NonFiniteReport> nonFinite;
      auto data = std::make_shared<core::EntryData>(core::loadEntry(reader, n, &nonFinite));
      std::lock_guard lock(warned->mutex);
      if (warned->entries.insert(n).second)
        for (const auto& nf : nonFinite)
          std::fprintf(
              stderr, "\nwarning: %s:/entries/%s/%s batch %lld head %lld holds %lld NaN/Inf values\n",
              core::shortForDisplay(path).c_str(), core::shortForDisplay(n).c_str(),
              core::toString(nf.tensor), (long long)nf.batch, (long long)nf.head, (long long)nf.count);
      return core::permuteEntry(data, permute, "--permute");  // before the engine sees it
    };
    inputs.push_back(std::move(in));
  }
  return inputs;
}

// The captures of one tune command, open for the whole job (their loaders refer to them), and their inputs:
// every entry (or the --entry ones) of each capture; entries of the same name are tuned together.
struct TuneCaptures {
  std::vector<std::string> paths;
  std::vector<std::unique_ptr<core::CaptureReader>> readers;
  std::vector<core::TuneInput> inputs;
  std::map<std::string, core::EntryInfo> infos;  // by inputKey
  core::Permutation permute = core::Permutation::None;

  explicit TuneCaptures(const TuneCliOptions& o) {
    try {
      permute = core::parsePermutation(o.permute);
    } catch (const Error& e) {
      throw Error("--permute", e.problem());
    }
    paths = o.files.empty() ? std::vector<std::string>{defaultCapturePath()} : o.files;
    for (size_t i = 0; i < paths.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (paths[i] == paths[j]) throw Error(paths[i], "given twice: each capture counts once");
    const std::vector<std::string> wanted = uniqueEntries(o.entries);
    std::map<std::string, int> seen;  // entry -> captures that hold it
    for (const std::string& path : paths) {
      readers.push_back(std::make_unique<core::CaptureReader>(path));
      const core::CaptureReader& reader = *readers.back();
      std::vector<std::string> names;
      for (const auto& e : reader.entries())
        if (wanted.empty() || std::find(wanted.begin(), wanted.end(), e.name) != wanted.end())
          names.push_back(e.name);
      for (const std::string& n : names) ++seen[n];
      for (core::TuneInput& in : tuneInputs(*readers.back(), names, o.heads, path, permute)) {
        infos[scaleout::inputKey(in)] = reader.entry(in.name);
        inputs.push_back(std::move(in));
      }
    }
    for (const std::string& n : wanted)
      if (!seen.count(n)) throw Error("--entry", "no capture holds entry \"" + core::printable(n) + "\"");
    if (paths.size() > 1)
      for (const auto& [name, count] : seen)
        if (count < int(paths.size()))
          std::fprintf(stderr, "note: entry %s is in %d of %zu captures: its parameters are tuned on those\n",
                       core::printable(name).c_str(), count, paths.size());
  }

  std::string digestOf(const core::TuneInput& in) const {
    for (size_t i = 0; i < paths.size(); ++i)
      if (paths[i] == in.capture) return core::entryDigest(*readers[i], in.name);
    throw Error(in.capture, "not a capture of this command");
  }
};

int runTuneCommand(const TuneCliOptions& o, const CLI::App& cmd) {
  const core::TuneOptions opt = tuneOptionsFrom(o, cmd);
  applyMaxMemory(o.maxMemory);
  const TuneCaptures captures(o);
  const std::string& path = captures.paths.front();

  TuneJobSpec spec;
  spec.capturePath = path;
  spec.groups = core::makeGroups(captures.inputs, o.groupByLayer);
  spec.permute = captures.permute;
  spec.infos = captures.infos;
  spec.digestOf = [&](const core::TuneInput& in) { return captures.digestOf(in); };
  spec.options = opt;
  spec.output = o.out.empty() ? o.resume : o.out;
  spec.trace = o.trace;
  spec.resumePath = o.resume;
  spec.engine = core::parseEngineChoice(o.engine);
  spec.threads = usableThreadsNoted(o.threads);
  spec.interrupt = &gCancel;
  // Before hours of tuning, not after; the output of --resume is that file, which it may replace.
  spec.checkOutputs = [&] {
    std::vector<NamedPath> inputs;
    for (const std::string& p : captures.paths) inputs.push_back({"capture", p});
    for (const std::string& p : o.validate) inputs.push_back({"--validate", p});
    checkOutputs({{o.out.empty() ? "--resume" : "-o", spec.output}}, inputs);
  };

  StopSignalGuard guard;
  ProgressPrinter progress;
  TuneJobOutput out;
  out.started = [&](const std::string& engine) {
    const std::string what =
        captures.paths.size() == 1 ? path : std::to_string(captures.paths.size()) + " captures";
    std::fprintf(stderr, "tuning %zu group%s of %s with %s: deployed l1 < %g%s, %s, %s%s%s%s%s%s\n",
                 spec.groups.size(), spec.groups.size() == 1 ? "" : "s", what.c_str(), engine.c_str(), opt.l1,
                 opt.tunePv ? (", l2 < " + fmtNum(opt.l2, 4)).c_str() : " (λ fixed)",
                 opt.method != core::Method::SpargeAttn
                     ? (std::string(core::methodLabel(opt.method)) + " " +
                        core::knobName(opt.method, opt.methodBase) + " search")
                           .c_str()
                 : opt.mode == core::SelectMode::Cdf ? "τ search"
                                                     : "top-k search",
                 numericsHeader(opt.geometry, opt.numerics).c_str(), opt.smoothK ? "" : ", no smooth-k",
                 opt.sink ? ", sink" : "", opt.diagonal ? ", +diagonal blocks (extension)" : "",
                 opt.numerics == core::Numerics::None
                     ? ""
                     : (std::string(", exact fallback ") + core::toString(opt.exactFallback)).c_str(),
                 spec.permute != core::Permutation::None
                     ? (std::string(", tokens in ") + core::toString(spec.permute) + " order").c_str()
                     : "");
  };
  out.progress = [&](const core::TuneProgress& p) { progress.update(p); };
  out.clearProgress = [&] { progress.clear(); };
  out.group = [&](const core::TunedGroup& g) { printGroup(g, opt); };
  out.finished = [&](const core::TuneResult& r) {
    const bool causal =
        std::any_of(spec.infos.begin(), spec.infos.end(), [](const auto& e) { return e.second.causal; });
    const std::string exact = core::exactFallbackNote(r);
    if (!exact.empty()) std::printf("%s\n", exact.c_str());
    // The hint explains SpargeAttn's parameters; the other methods have none of them.
    if (const auto hint =
            opt.method == core::Method::SpargeAttn ? core::denseTuneHint(r, causal) : std::nullopt)
      std::printf("%s\n", hintLine("", *hint).c_str());
  };
  const int code = runTuneJob(jobTransport(), spec, out);
  if (code != 0 || o.validate.empty() || jobTransport().rank() != 0) return code;
  return validateHeldOut(spec.output, o.validate, spec.engine, o.threads);
}

}  // namespace

void registerTune(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("tune", "Auto-tune per-head θ, τ (or top-k) and λ against an L1 budget");
  auto o = std::make_shared<TuneCliOptions>();
  addTuneOptions(*cmd, *o);
  cmd->callback([&action, o, cmd] {
    tuneOptionsFrom(*o, *cmd);  // before any work
    action = [o, cmd]() -> int { return runTuneCommand(*o, *cmd); };
  });
}

}  // namespace sparge::cli
