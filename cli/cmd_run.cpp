// `sparge run [FILE]`: predict + sparse attention + dense reference + metrics per head, with a table,
// and optional exports (masks v1, JSON/CSV report).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "commands.h"
#include "entry_pieces.h"
#include "format.h"
#include "guards.h"
#include "job_support.h"
#include "option_checks.h"
#include "piece_job.h"
#include "rank_timings.h"
#include "run_options.h"
#include "sparge/core/capture.h"
#include "sparge/core/dense_hint.h"
#include "sparge/core/error.h"
#include "sparge/core/exports.h"
#include "sparge/core/memory_guard.h"
#include "sparge/core/method_knob.h"
#include "sparge/core/names.h"
#include "sparge/core/option_values.h"
#include "sparge/core/parallel.h"
#include "sparge/core/params_io.h"
#include "sparge/core/permutation.h"
#include "sparge/profiler/profile_entry.h"
#include "sparge/profiler/profiler.h"
#include "sparge/scaleout/codec.h"

namespace sparge::cli {

using scaleout::encodeTimings;
using scaleout::entryJobSpec;
using scaleout::jobTransport;
using scaleout::makeRankEngine;
using scaleout::mergeEntryPieces;
using scaleout::mergeTimings;
using scaleout::PieceJobHooks;
using scaleout::placeThisRank;
using scaleout::RankEngine;
using scaleout::runPieceJob;
namespace {

// Dense attention work in FLOP: 4·B·H·Nq·Nkv·D (QKᵀ and PV), halved when causal.
double denseFlops(const core::EntryInfo& e) {
  const double f =
      4.0 * double(e.batch) * double(e.headsQ) * double(e.tokensQ) * double(e.tokensKV) * double(e.headDim);
  return e.causal ? f / 2.0 : f;
}

// Heads whose Q, K or V hold NaN/Inf get hasNonFinite (a K/V head taints every query head of its group),
// so the table and the report say that their figures are not meaningful.
void markNonFiniteInputs(core::EntryResult& r, const std::vector<core::NonFiniteReport>& nonFinite) {
  for (const core::NonFiniteReport& nf : nonFinite)
    for (core::HeadResult& h : r.heads) {
      if (h.batch != nf.batch) continue;
      const bool hit = nf.tensor == core::Tensor::Q ? h.head == nf.head : r.info.kvHeadOf(h.head) == nf.head;
      if (hit && !h.hasNonFinite) {
        h.hasNonFinite = true;
        r.warnings.push_back("head " + std::to_string(h.head) + ": NaN/Inf in its " +
                             core::toString(nf.tensor) +
                             " input; its sparsity and error figures are not meaningful");
      }
    }
}

// The per-head table of an entry; with a budget, whether each head's L1 over its batch items is over it.
void printHeadTable(const core::EntryResult& r, std::optional<double> budget) {
  const auto& e = r.info;
  const bool quant = r.config.numerics != core::Numerics::None;
  // Without quantization the sparse-only error is the deployed one and the quantization error is 0; a part
  // the engine did not measure (an exact head's, or the Q·Kᵀ part on the CUDA engine) is "-".
  auto cell = [&](const core::ErrorSums& s, double v, int digits) {
    return quant && s.count > 0 ? fmtNum(v, digits) : std::string("-");
  };
  std::map<int64_t, bool> over;
  if (budget)
    for (const auto& [h, err] : core::headErrors(r)) over[h] = core::overBudget(err.l1(), *budget);
  const core::Method method = r.config.method;
  const bool sparge = method == core::Method::SpargeAttn;
  std::vector<std::string> cols = {"head",
                                   sparge ? "θ" : core::methodLabel(method),
                                   sparge ? "τ/topk" : "pairs",
                                   "λ",
                                   "stage1",
                                   "pv-skip",
                                   "total",
                                   "total(area)"};
  if (quant || r.config.mixedNumerics()) cols.push_back("numerics");
  for (const char* c : {"L1", "L1 sparse", "L1 quant", "L1 quant Q·Kᵀ", "cos", "cos sparse", "cos quant"})
    cols.push_back(c);
  if (budget) cols.push_back("budget");
  Table t(cols);
  for (const core::HeadResult& h : r.heads) {
    const auto& p = h.params;
    std::string sel = p.mode == core::SelectMode::Cdf ? "τ " + fmtNum(p.tau, 3) : "k " + fmtNum(p.topk, 3);
    std::string head = (e.batch > 1 ? "b" + std::to_string(h.batch) + " " : "") + std::to_string(h.head);
    // Other methods: their parameters, and the share of token pairs they choose themselves (when they choose
    // tokens rather than blocks).
    if (!sparge)
      sel = std::isfinite(h.elementPairs) && h.sparsity.validArea > 0
                ? fmtPct(h.elementPairs / h.sparsity.validArea)
                : "-";
    std::vector<std::string> row = {
        head + (p.dense ? " (dense)" : "") + (h.hasNonFinite ? " (NaN/Inf!)" : ""),
        sparge ? fmtNum(p.theta, 3) : core::describeMethodParams(method, p),
        sel,
        fmtNum(p.lambda, 1),
        fmtPct(h.sparsity.stage1()),
        fmtPct(h.sparsity.pvSkipRate()),
        fmtPct(h.sparsity.total()),
        fmtPct(h.sparsity.totalArea())};
    if (quant || r.config.mixedNumerics()) row.push_back(core::toString(r.config.numericsFor(h.head)));
    for (std::string c :
         {fmtNum(h.error.l1(), 5), cell(h.errorSparse, h.errorSparse.l1(), 5),
          cell(h.errorQuant, h.errorQuant.l1(), 5), cell(h.errorQuantQk, h.errorQuantQk.l1(), 5),
          fmtNum(h.error.cosSim(), 6), cell(h.errorSparse, h.errorSparse.cosSim(), 6),
          cell(h.errorQuant, h.errorQuant.cosSim(), 6)})
      row.push_back(c);
    if (budget) row.push_back(over[h.head] ? "OVER" : "ok");
    t.row(row);
  }
  t.print(std::cout);
}

// With a budget (the parameter file's), each head's L1 over its batch items is judged against it.
void printEntry(const core::EntryResult& r, bool perHead, std::optional<double> budget) {
  const auto& e = r.info;
  const bool quant = r.config.numerics != core::Numerics::None;
  const std::string grid = e.grid ? " grid " + e.grid->shape() : "";
  std::printf("\nentry %s  [B=%lld Hq=%lld Hkv=%lld Nq=%lld Nkv=%lld D=%lld%s%s%s]  %s%s  engine %s\n",
              core::shortForDisplay(e.name).c_str(), (long long)e.batch, (long long)e.headsQ,
              (long long)e.headsKV, (long long)e.tokensQ, (long long)e.tokensKV, (long long)e.headDim,
              e.causal ? " causal" : "",
              e.window.bounded() ? (" window " + core::toString(e.window)).c_str() : "", grid.c_str(),
              numericsHeader(r.config.geometry, r.config.numerics).c_str(),
              (std::string(r.config.diagonal ? "  +diagonal blocks (extension)" : "") +
               (e.permutation != core::Permutation::None
                    ? std::string("  tokens in ") + core::toString(e.permutation) + " order"
                    : ""))
                  .c_str(),
              r.engine.c_str());
  if (perHead) printHeadTable(r, budget);
  std::printf(
      "all heads: stage1 %s  pv-skip %s  total %s (by token area %s)  L1 %.5f%s  cos %.6f  rmse %.3g\n",
      fmtPct(r.sparsity.stage1()).c_str(), fmtPct(r.sparsity.pvSkipRate()).c_str(),
      fmtPct(r.sparsity.total()).c_str(), fmtPct(r.sparsity.totalArea()).c_str(), r.error.l1(),
      quant ? (" (sparse alone " + fmtNum(r.errorSparse.l1(), 5) + ", quantization alone " +
               fmtNum(r.errorQuant.l1(), 5) + ")")
                  .c_str()
            : "",
      r.error.cosSim(), r.error.rmse());
  const auto& tm = r.times;
  const std::string reference = tm.referenceCached     ? "cached"
                                : tm.referenceInSparse ? "in the sparse pass"
                                                       : fmtNum(tm.referenceMs, 1) + " ms";
  std::printf(
      "time (%s clock): predict %.1f ms  sparse %.1f ms  reference %s  metrics %.1f ms  total %.1f ms\n",
      tm.clock.c_str(), tm.predictMs, tm.sparseMs, reference.c_str(), tm.metricsMs, tm.totalMs);
  if (tm.hostMs > 0)
    std::printf(
        "host side (wall clock): %.1f ms, of it queueing %.1f, waiting for the GPU %.1f, results %.1f; "
        "copies %.1f ms for %.1f MiB\n",
        tm.hostMs, tm.hostQueueMs, tm.hostWaitMs, tm.hostResultsMs, tm.copyMs,
        (double)tm.copyBytes / (1 << 20));
  if (!tm.referenceCached && tm.referenceMs > 0)
    std::printf("dense reference: %.1f GFLOP in %.1f ms = %.1f GFLOP/s\n", denseFlops(e) / 1e9,
                tm.referenceMs, denseFlops(e) / (tm.referenceMs * 1e6));
  for (const std::string& w : r.warnings)
    std::fprintf(stderr, "warning: entry %s: %s\n", core::shortForDisplay(e.name).c_str(),
                 core::printable(w).c_str());
}

// `repeat` and `warmup` are per entry and per kind of run (sparse, dense, each baseline); with `warmupMs`
// the warm-up went on until that long had passed.
void printTimings(const prof::TimingReport& r, int repeat, int warmup, int warmupMs) {
  const std::string more = warmupMs > 0 ? " or more, for " + std::to_string(warmupMs) + " ms or more" : "";
  std::printf("\ntimings: %s, %d profiled runs after %d warm-up%s; %s\n", r.clock.c_str(), repeat, warmup,
              more.c_str(), r.device.name.c_str());
  if (!r.sourceReason.empty()) std::printf("  clock source: %s\n", r.sourceReason.c_str());
  if (!r.device.clockNote.empty()) std::printf("  SM clock: %s\n", r.device.clockNote.c_str());
  Table t({"stage", "source", "min ms", "median ms", "max ms", "runs"});
  for (const prof::StageStat& s : r.stages)
    t.row({prof::toString(s.stage), prof::toString(s.source), fmtNum(s.ms.min, 3), fmtNum(s.ms.median, 3),
           fmtNum(s.ms.max, 3), std::to_string(s.ms.count)});
  t.print(std::cout);
  const prof::DerivedFigures& d = r.derived;
  if (d.speedup) {
    // The headline divides the fastest dense time measured; ours is shown beside it.
    std::string beside;
    if (d.speedupBaseline == "cudnn" && d.speedupOverDense)
      beside = " (the fastest dense measured); over our dense kernel " + fmtNum(*d.speedupOverDense, 3) + "x";
    else if (d.speedupBaseline == "dense" && d.cudnnMs)
      beside = " (faster than cuDNN's " + fmtNum(*d.cudnnMs, 3) + " ms)";
    std::printf("  speedup of sparse over %s: %.2fx%s\n", d.speedupBaseline.c_str(), *d.speedup,
                beside.c_str());
  }
  if (d.denseEquivalentTops) {
    std::string dense = d.denseTops ? ", our dense " + fmtNum(*d.denseTops, 4) + " TOPS" : "";
    if (d.cudnnTops) dense += ", cuDNN " + fmtNum(*d.cudnnTops, 4) + " TOPS";
    std::printf("  dense-equivalent %.4f TOPS, executed %.4f TOPS%s\n", *d.denseEquivalentTops,
                d.executedTops.value_or(0.0), dense.c_str());
  }
  if (!d.note.empty()) std::printf("  note: %s\n", d.note.c_str());
  for (const std::string& n : r.notes) std::printf("  note: %s\n", n.c_str());
}

// One rank's part of `sparge run` (its engine and profiler) and, on rank 0, the results in entry order.
struct EntryRun {
  explicit EntryRun(const RunCommandOptions& options)
      : o(options),
        path(o.file.empty() ? defaultCapturePath() : o.file),
        reader(path),
        profiling(o.repeat > 1 || !o.timingsPath.empty()) {
    names = uniqueEntries(o.entries);
    if (names.empty())
      for (const auto& e : reader.entries()) names.push_back(e.name);
    // Fail early on a misspelt entry, and on a permutation that cannot apply (before any rank computes).
    for (const auto& n : names) runPermutation(o, reader.entry(n));
    if (!o.paramsPath.empty()) params = core::readParams(o.paramsPath);
  }

  // An entry in memory with its NaN/Inf reports.
  struct LoadedEntry {
    std::shared_ptr<core::EntryData> data;
    std::vector<core::NonFiniteReport> nonFinite;
  };

  // Loads entry `unit` for a run of `heads` with `geometry`, after checking that the run fits in memory.
  LoadedEntry load(size_t unit, const std::vector<int64_t>& heads, const core::Geometry& geometry) const {
    const core::EntryInfo& info = reader.entry(names[unit]);
    core::checkRunMemory(path, info, geometry, std::set<int64_t>(heads.begin(), heads.end()).size());
    LoadedEntry l;
    l.data = std::make_shared<core::EntryData>(core::loadEntry(reader, names[unit], &l.nonFinite));
    return l;
  }

  // The rank's first piece (the plan's), loaded by start() while it creates the engine.
  void first(size_t unit, const std::vector<int64_t>& heads, bool whole) {
    firstUnit = unit;
    firstHeads = whole ? o.heads : heads;
  }

  // Rank 0 (the only writer) checks every output before any rank computes, so that a bad path never
  // costs a whole run; then the rank is placed, its first entry starts loading on another thread, and its
  // engine (CUDA's start-up) and profiler are created meanwhile. Errors of the load (its memory check
  // included) are thrown when runEntry takes the entry, as a direct load's would be.
  scaleout::RankInfo start() {
    if (jobTransport().rank() == 0)
      checkOutputs({{"--masks", o.masksPath}, {"--report", o.reportPath}, {"--timings", o.timingsPath}},
                   {{"capture", path}, {"--params", o.paramsPath}});
    const scaleout::Placement placement = placeThisRank(jobTransport(), o.threads);
    if (firstUnit)
      prefetched = core::startAsync([this, unit = *firstUnit] {
        return load(unit, firstHeads, makeRunConfig(o, reader.entry(names[unit]), path, nullptr).geometry);
      });
    rank = std::make_unique<RankEngine>(makeRankEngine(placement, core::parseEngineChoice(o.engine)));
    const core::Engine& engine = *rank->selection.engine;
    if (!rank->selection.message.empty() && jobTransport().rank() == 0)
      std::fprintf(stderr, "note: %s\n", rank->selection.message.c_str());
    if (profiling) {
      prof::ProfilerOptions po;  // profileEntry marks its warm-up runs itself
      po.useCupti = engine.isGpu();
      po.useCudaEvents = engine.isGpu();
      profiler = std::make_unique<prof::Profiler>(po);
    }
    return rank->info;
  }

  // Runs `heads` of entry `unit` (the requested heads when `whole`); the result, encoded for rank 0.
  std::string runEntry(size_t unit, const std::vector<int64_t>& heads, bool whole) {
    core::Engine& engine = *rank->selection.engine;
    const std::string& name = names[unit];
    const std::vector<int64_t>& runHeads = whole ? o.heads : heads;
    std::vector<std::string> configWarnings;
    core::RunConfig config = makeRunConfig(o, reader.entry(name), path, &configWarnings);
    runPermutation(o, reader.entry(name), &configWarnings);        // only its notes here
    const bool loading = firstUnit == unit && prefetched.valid();  // start() began loading it
    const LoadedEntry loaded = loading ? prefetched.get() : load(unit, runHeads, config.geometry);
    for (const auto& nf : loaded.nonFinite)
      std::fprintf(stderr, "warning: %s:/entries/%s/%s batch %lld head %lld holds %lld NaN/Inf values\n",
                   core::shortForDisplay(path).c_str(), core::shortForDisplay(name).c_str(),
                   core::toString(nf.tensor), (long long)nf.batch, (long long)nf.head, (long long)nf.count);
    for (const auto& w : configWarnings)
      std::fprintf(stderr, "note: entry %s: %s\n", core::shortForDisplay(name).c_str(),
                   core::printable(w).c_str());
    // Parameters tuned on other inputs are refused unless asked for (--params-any-capture).
    const std::string identity =
        params ? core::checkParamsIdentity(*params, o.paramsPath, loaded.data->info, path,
                                           loaded.data->digest, o.paramsAnyCapture)
               : std::string();
    // Permuted once here, before either engine sees the entry (docs/permutation.md).
    engine.setEntry(core::permuteEntry(loaded.data, runPermutation(o, reader.entry(name)), "--permute"));
    core::RunOptions ro;
    ro.heads = runHeads;
    ro.quantBreakdown = true;
    core::EntryResult r;
    if (profiling) {
      prof::ProfileRequest req;
      req.entry = name;
      req.config = config;
      req.heads = ro.heads;
      req.warmup = o.warmup;
      req.warmupMs = o.warmupMs;
      req.repeat = o.repeat;
      req.denseBaseline = req.engineBaselines = !o.noDenseBaseline;
      r = prof::profileEntry(engine, *profiler, req);
    } else {
      r = engine.run(config, ro);
    }
    markNonFiniteInputs(r, loaded.nonFinite);
    if (!identity.empty()) r.warnings.push_back(identity);
    return scaleout::encodeResult(r);
  }

  PieceJobHooks hooks() {
    PieceJobHooks h;
    h.first = [this](size_t unit, const std::vector<int64_t>& heads, bool whole) {
      first(unit, heads, whole);
    };
    h.start = [this] { return start(); };
    h.run = [this](size_t unit, const std::vector<int64_t>& heads, bool whole) {
      return runEntry(unit, heads, whole);
    };
    h.final = [this] { return profiler ? encodeTimings(profiler->collect()) : std::string(); };
    h.unitDone = [this](size_t unit, std::vector<std::string>& parts) {
      results.push_back(mergeEntryPieces(parts, names[unit]));
      printEntry(results.back(), !o.summaryOnly, params ? std::optional<double>(params->l2) : std::nullopt);
    };
    h.finals = [this](std::vector<std::string>& payloads) {
      if (profiling) timings = mergeTimings(payloads);
    };
    return h;
  }

  const RunCommandOptions& o;
  std::string path;
  core::CaptureReader reader;
  std::vector<std::string> names;
  std::optional<core::ParamsFile> params;  // --params
  bool profiling = false;
  std::optional<size_t> firstUnit;  // the first piece's entry and heads, see first()
  std::vector<int64_t> firstHeads;
  std::future<LoadedEntry> prefetched;  // the first piece's entry, loading or loaded
  std::unique_ptr<RankEngine> rank;
  std::unique_ptr<prof::Profiler> profiler;
  std::vector<core::EntryResult> results;  // rank 0
  prof::ReportInput timings;               // rank 0: every rank's runs
};

// The heads above the parameter file's budget, over all entries (those the file was not tuned on counted
// apart: held-out violations, as `sparge tune --validate` records them).
void printBudgetSummary(const std::vector<core::EntryResult>& results, const core::ReportBudget& budget) {
  int64_t heads = 0, over = 0, heldOutHeads = 0, heldOutOver = 0;
  std::string list;
  for (const core::EntryResult& r : results) {
    const bool heldOut = budget.heldOut.count(r.info.name) > 0;
    for (const auto& [h, err] : core::headErrors(r)) {
      const bool o = core::overBudget(err.l1(), budget.l1);
      ++heads;
      over += o;
      heldOutHeads += heldOut;
      heldOutOver += heldOut && o;
      if (o)
        list += (list.empty() ? "" : ", ") + core::printable(r.info.name) + " head " + std::to_string(h) +
                " " + fmtNum(err.l1(), 4);
    }
  }
  std::printf("budget (the parameter file's deployed L1 %g): %lld of %lld heads over", budget.l1,
              (long long)over, (long long)heads);
  if (heldOutHeads > 0)
    std::printf("; on held-out inputs (not tuned on) %lld of %lld", (long long)heldOutOver,
                (long long)heldOutHeads);
  std::printf("%s%s\n", list.empty() ? "" : ": ", list.c_str());
}

// Rank 0, after the job: totals, timings, why the run came out dense (when it did), masks and the report.
void writeOutputs(const EntryRun& run, double seconds) {
  const RunCommandOptions& o = run.o;
  std::printf("\n%zu entries in %.2f s\n", run.results.size(), seconds);
  if (run.profiling) {
    const prof::TimingReport report = prof::buildReport(run.timings);
    printTimings(report, o.repeat, o.warmup, o.warmupMs);
    if (!o.timingsPath.empty()) {
      prof::writeTimings(report, o.timingsPath);
      std::printf("timings written to %s\n", o.timingsPath.c_str());
    }
  }
  std::optional<core::ReportBudget> budget;
  if (run.params) {
    budget = core::ReportBudget{run.params->l2, {}};
    for (const core::EntryResult& r : run.results)
      for (const std::string& w : r.warnings)
        if (w.rfind(core::kHeldOutNote, 0) == 0) budget->heldOut.insert(r.info.name);
    printBudgetSummary(run.results, *budget);
  }
  // The hint explains SpargeAttn's parameters; other methods have their own.
  const bool sparge = std::all_of(run.results.begin(), run.results.end(), [](const core::EntryResult& r) {
    return r.config.method == core::Method::SpargeAttn;
  });
  if (const auto hint =
          sparge ? core::denseRunHint(run.results, budget ? std::optional<double>(budget->l1) : std::nullopt)
                 : std::nullopt)
    std::printf("%s\n", hintLine(hint->quantization ? "" : "nearly all dense: ", *hint).c_str());
  if (!o.masksPath.empty()) {
    core::writeMasks(o.masksPath, run.results);
    std::printf("masks written to %s\n", o.masksPath.c_str());
  }
  if (!o.reportPath.empty()) {
    const core::ReportBudget* b = budget ? &*budget : nullptr;
    const std::string format = core::outputFormat(o.reportPath, kReportFormats);
    if (format == ".csv")
      core::writeReportCsv(o.reportPath, run.results, b);
    else if (format == ".md")
      core::writeReportMarkdown(o.reportPath, run.results, run.path, {}, b);
    else
      core::writeReportJson(o.reportPath, run.results, run.path, b);
    std::printf("report written to %s\n", o.reportPath.c_str());
  }
}

}  // namespace

void registerRun(CLI::App& app, Action& action) {
  auto* cmd =
      app.add_subcommand("run", "Run SpargeAttn on captured entries: masks, PV skips, error vs dense");
  auto o = std::make_shared<RunCommandOptions>();
  auto maxMemory = std::make_shared<std::string>();
  cmd->add_option("file", o->file, "Capture file (.h5); default: the bundled sample capture");
  cmd->add_option("--entry", o->entries, "Entry to run (repeatable); default: all entries");
  addMethodOptions(*cmd, *o);
  addMaxMemoryOption(*cmd, *maxMemory);
  cmd->add_option("--masks", o->masksPath, "Write masks v1 (.h5)");
  cmd->add_option("--report", o->reportPath, "Write the report (.json, .csv or .md)")
      ->check(outputFormats(kReportFormats));
  cmd->add_flag("--summary-only", o->summaryOnly,
                "Print only the per-entry summary line, not the per-head table");
  cmd->add_option("--repeat", o->repeat, "Profiled runs per entry (min / median / max in the timing report)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Unmeasured runs before the profiled ones, at least")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option(
         "--warmup-ms", o->warmupMs,
         "Unmeasured runs before the profiled ones until at least this many milliseconds have passed, "
         "so that they find the GPU under sustained load (e.g. 200; default 0: --warmup alone)")
      ->check(CLI::Range(0, 600000))
      ->capture_default_str();
  cmd->add_option("--timings", o->timingsPath,
                  "Write timing statistics: .json, .csv or .trace.json (Perfetto)")
      ->check(outputFormats(kTimingFormats));
  cmd->add_flag(
      "--no-dense-baseline", o->noDenseBaseline,
      "Do not time dense runs (ours over every valid block, and cuDNN's) next to each profiled run");
  cmd->callback([&action, o, maxMemory] {
    checkMethodOptions(*o);
    action = [o, maxMemory] {
      applyMaxMemory(*maxMemory);
      o->threads = usableThreadsNoted(o->threads);
      EntryRun run(*o);
      const auto t0 = std::chrono::steady_clock::now();
      const int code =
          runPieceJob(jobTransport(), entryJobSpec(run.reader, run.names, o->heads), run.hooks());
      if (code != 0 || jobTransport().rank() != 0) return code;
      writeOutputs(run, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      return 0;
    };
  });
}

}  // namespace sparge::cli
