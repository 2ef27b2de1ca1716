// `sparge run [FILE]`: predict + sparse attention + dense reference + metrics per head, with a table,
// and optional exports (masks v1, JSON/CSV report).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "format.h"
#include "run_options.h"
#include "sparge/core/capture.h"
#include "sparge/core/error.h"
#include "sparge/core/exports.h"
#include "sparge/kernels/engine_factory.h"
#include "sparge/profiler/profiler.h"

namespace sparge::cli {
namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

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

void printEntry(const core::EntryResult& r, bool perHead) {
  const auto& e = r.info;
  const bool quant = r.config.numerics != core::Numerics::None;
  std::printf("\nentry %s  [B=%lld Hq=%lld Hkv=%lld Nq=%lld Nkv=%lld D=%lld%s]  %s  engine %s\n",
              e.name.c_str(), (long long)e.batch, (long long)e.headsQ, (long long)e.headsKV,
              (long long)e.tokensQ, (long long)e.tokensKV, (long long)e.headDim, e.causal ? " causal" : "",
              numericsHeader(r.config.geometry, r.config.numerics).c_str(), r.engine.c_str());
  // Without quantization the sparse-only error is the deployed one and the quantization error is 0.
  auto quantCell = [&](double v, int digits) { return quant ? fmtNum(v, digits) : std::string("-"); };
  if (perHead) {
    Table t({"head", "θ", "τ/topk", "λ", "stage1", "pv-skip", "total", "total(area)", "L1", "L1 sparse",
             "L1 quant", "cos", "cos sparse", "cos quant"});
    for (const core::HeadResult& h : r.heads) {
      const auto& p = h.params;
      std::string sel = p.mode == core::SelectMode::Cdf ? "τ " + fmtNum(p.tau, 3) : "k " + fmtNum(p.topk, 3);
      std::string head = (e.batch > 1 ? "b" + std::to_string(h.batch) + " " : "") + std::to_string(h.head);
      t.row({head + (p.dense ? " (dense)" : "") + (h.hasNonFinite ? " (NaN/Inf!)" : ""), fmtNum(p.theta, 3),
             sel, fmtNum(p.lambda, 1), fmtPct(h.sparsity.stage1()), fmtPct(h.sparsity.pvSkipRate()),
             fmtPct(h.sparsity.total()), fmtPct(h.sparsity.totalArea()), fmtNum(h.error.l1(), 5),
             quantCell(h.errorSparse.l1(), 5), quantCell(h.errorQuant.l1(), 5), fmtNum(h.error.cosSim(), 6),
             quantCell(h.errorSparse.cosSim(), 6), quantCell(h.errorQuant.cosSim(), 6)});
    }
    t.print(std::cout);
  }
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
  if (!tm.referenceCached && tm.referenceMs > 0)
    std::printf("dense reference: %.1f GFLOP in %.1f ms = %.1f GFLOP/s\n", denseFlops(e) / 1e9,
                tm.referenceMs, denseFlops(e) / (tm.referenceMs * 1e6));
  for (const std::string& w : r.warnings)
    std::fprintf(stderr, "warning: entry %s: %s\n", e.name.c_str(), w.c_str());
}

// Runs one entry warmup + repeat times under the profiler. Each profiled run is followed by a dense
// baseline run (every valid block, no PV skip, no error) whose time is recorded as the dense stage, so
// the report can give the speedup of sparse over dense. Returns the last sparse result.
core::EntryResult profileEntry(core::Engine& engine, prof::Profiler& profiler, const std::string& name,
                               const core::RunConfig& config, const core::RunOptions& options,
                               const RunCommandOptions& o) {
  core::RunConfig denseConfig = config;
  denseConfig.perHead.clear();
  denseConfig.defaults.dense = true;
  core::RunOptions denseOptions = options;
  denseOptions.computeError = false;
  core::EntryResult last;
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    {
      prof::ProfileScope scope(profiler, prof::makeRunInfo(name, config, options.heads, engine.name()));
      last = engine.run(config, options);
      scope.end(&last);
    }
    if (!o.noDenseBaseline) {
      if (profiler.source() == prof::TimingSource::Cupti) {
        // Under CUPTI the dense run's kernels (sparge_dense_*) are attributed to the dense stage by name.
        prof::ProfileScope scope(profiler, prof::makeRunInfo(name + " (dense baseline)", denseConfig,
                                                             options.heads, engine.name()));
        engine.run(denseConfig, denseOptions);
        scope.end();
      } else {
        // Otherwise the dense run's Stage-2 time, on the engine's clock (CUDA events or wall), is recorded as
        // the dense stage of this run.
        const core::EntryResult dense = engine.run(denseConfig, denseOptions);
        profiler.record(prof::Stage::Dense, dense.times.sparseMs,
                        prof::parseTimingSource(dense.times.clock).value_or(prof::TimingSource::WallClock));
      }
    }
  }
  return last;
}

void printTimings(const prof::TimingReport& r) {
  std::printf("\ntimings: %s, %d profiled runs after %d warm-up; %s\n", r.clock.c_str(), r.profiledRuns,
              r.warmupRuns, r.device.name.c_str());
  if (!r.sourceReason.empty()) std::printf("  clock source: %s\n", r.sourceReason.c_str());
  if (!r.device.clockNote.empty()) std::printf("  SM clock: %s\n", r.device.clockNote.c_str());
  Table t({"stage", "source", "min ms", "median ms", "max ms", "runs"});
  for (const prof::StageStat& s : r.stages)
    t.row({prof::toString(s.stage), prof::toString(s.source), fmtNum(s.ms.min, 3), fmtNum(s.ms.median, 3),
           fmtNum(s.ms.max, 3), std::to_string(s.ms.count)});
  t.print(std::cout);
  const prof::DerivedFigures& d = r.derived;
  if (d.speedup) std::printf("  speedup of sparse over %s: %.2fx\n", d.speedupBaseline.c_str(), *d.speedup);
  if (d.denseEquivalentTops)
    std::printf("  dense-equivalent %.4f TOPS, executed %.4f TOPS%s\n", *d.denseEquivalentTops,
                d.executedTops.value_or(0.0),
                d.denseTops ? (", dense " + fmtNum(*d.denseTops, 4) + " TOPS").c_str() : "");
  if (!d.note.empty()) std::printf("  note: %s\n", d.note.c_str());
}

}  // namespace

void registerRun(CLI::App& app, Action& action) {
  auto* cmd =
      app.add_subcommand("run", "Run SpargeAttn on captured entries: masks, PV skips, error vs dense");
  auto o = std::make_shared<RunCommandOptions>();
  cmd->add_option("file", o->file, "Capture file (.h5); default: the bundled sample capture");
  cmd->add_option("--entry", o->entries, "Entry to run (repeatable); default: all entries");
  addMethodOptions(*cmd, *o);
  cmd->add_option("--masks", o->masksPath, "Write masks v1 (.h5)");
  cmd->add_option("--report", o->reportPath, "Write the report (.json, .csv or .md)");
  cmd->add_flag("--summary-only", o->summaryOnly,
                "Print only the per-entry summary line, not the per-head table");
  cmd->add_option("--repeat", o->repeat, "Profiled runs per entry (min / median / max in the timing report)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Unmeasured runs before the profiled ones")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--timings", o->timingsPath,
                  "Write timing statistics: .json, .csv or .trace.json (Perfetto)");
  cmd->add_flag("--no-dense-baseline", o->noDenseBaseline,
                "Do not time a dense run (every valid block) next to each profiled run");
  cmd->callback([&action, o] {
    action = [o] {
      const std::string path = o->file.empty() ? defaultCapturePath() : o->file;
      core::CaptureReader reader(path);
      std::vector<std::string> names = o->entries;
      if (names.empty())
        for (const auto& e : reader.entries()) names.push_back(e.name);
      for (const auto& n : names) reader.entry(n);  // fail early on a misspelt entry

      engines::EngineSelection sel = engines::makeEngine(core::parseEngineChoice(o->engine), o->threads);
      if (!sel.message.empty()) std::fprintf(stderr, "note: %s\n", sel.message.c_str());
      std::vector<core::EntryResult> results;
      const bool profiling = o->repeat > 1 || !o->timingsPath.empty();
      std::unique_ptr<prof::Profiler> profiler;
      if (profiling) {
        prof::ProfilerOptions po;
        // Under CUPTI each repeat is two profiler runs (sparse, then the dense baseline).
        po.warmup = o->warmup * (sel.engine->isGpu() && !o->noDenseBaseline ? 2 : 1);
        po.useCupti = sel.engine->isGpu();
        po.useCudaEvents = sel.engine->isGpu();
        profiler = std::make_unique<prof::Profiler>(po);
      }
      const auto t0 = std::chrono::steady_clock::now();
      for (const std::string& name : names) {
        std::vector<core::NonFiniteReport> nonFinite;
        auto entry = std::make_shared<core::EntryData>(core::loadEntry(reader, name, &nonFinite));
        for (const auto& nf : nonFinite)
          std::fprintf(stderr, "warning: %s:/entries/%s/%s batch %lld head %lld holds %lld NaN/Inf values\n",
                       path.c_str(), name.c_str(), core::toString(nf.tensor), (long long)nf.batch,
                       (long long)nf.head, (long long)nf.count);
        std::vector<std::string> configWarnings;
        core::RunConfig config = makeRunConfig(*o, entry->info, path, &configWarnings);
        for (const auto& w : configWarnings)
          std::fprintf(stderr, "note: entry %s: %s\n", name.c_str(), w.c_str());
        sel.engine->setEntry(entry);
        core::RunOptions ro;
        ro.heads = o->heads;
        if (profiling) {
          results.push_back(profileEntry(*sel.engine, *profiler, name, config, ro, *o));
        } else {
          results.push_back(sel.engine->run(config, ro));
        }
        markNonFiniteInputs(results.back(), nonFinite);
        printEntry(results.back(), !o->summaryOnly);
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("\n%zu entries in %.2f s\n", results.size(), seconds);
      if (profiling) {
        const prof::TimingReport report = profiler->report();
        printTimings(report);
        if (!o->timingsPath.empty()) {
          prof::writeTimings(report, o->timingsPath);
          std::printf("timings written to %s\n", o->timingsPath.c_str());
        }
      }
      if (!o->masksPath.empty()) {
        core::writeMasks(o->masksPath, results);
        std::printf("masks written to %s\n", o->masksPath.c_str());
      }
      if (!o->reportPath.empty()) {
        if (endsWith(o->reportPath, ".csv"))
          core::writeReportCsv(o->reportPath, results);
        else if (endsWith(o->reportPath, ".md"))
          core::writeReportMarkdown(o->reportPath, results, path);
        else
          core::writeReportJson(o->reportPath, results, path);
        std::printf("report written to %s\n", o->reportPath.c_str());
      }
      return 0;
    };
  });
}

}  // namespace sparge::cli
