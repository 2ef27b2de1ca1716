// `sparge bench --engine cpu` (cpu_bench.h): times the CPU engine as a viewer and `sparge run` use it.
#include "cpu_bench.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "format.h"
#include "sparge/build_info.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/cpu_engine.h"
#include "sparge/core/error.h"
#include "sparge/core/synthetic.h"
#include "sparge/profiler/report.h"

namespace sparge::cli {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Spread {
  double min = 0, median = 0, max = 0;
};

Spread spreadOf(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

struct Shape {
  int64_t heads = 0, tokens = 0, dim = 0;
  std::string label() const {
    return std::to_string(heads) + "x" + std::to_string(tokens) + "x" + std::to_string(dim);
  }
};

Shape parseShape(const std::string& text, const std::string& where) {
  Shape s;
  char x1 = 0, x2 = 0;
  std::istringstream in(text);
  if (!(in >> s.heads >> x1 >> s.tokens >> x2 >> s.dim) || x1 != 'x' || x2 != 'x' || !in.eof() ||
      s.heads < 1 || s.tokens < 1 || s.dim < 1 || s.heads > 4096 || s.tokens > (1 << 20) || s.dim > 1024)
    throw Error(where,
                "expected HEADSxTOKENSxDIM such as 9x2048x64 (heads <= 4096, tokens <= 1048576, "
                "dim <= 1024), got '" +
                    text + "'");
  return s;
}

// One row of the table: a case on one variant in one numerics.
struct Row {
  std::string caseName, entry, isa, numerics;
  int runs = 0;
  Spread shown, complete;  // the figures on screen (deployed), and with the error split
  Spread predict, quantize, sparse, metrics;
};

struct Samples {
  std::vector<double> shown, complete, predict, quantize, sparse, metrics;
  void add(const core::StageTimes& t) {
    predict.push_back(t.predictMs);
    quantize.push_back(t.quantizeMs);
    sparse.push_back(t.sparseMs);
    metrics.push_back(t.metricsMs);
  }
  Row row(std::string caseName, const Shape& s, core::Numerics n) const {
    return {std::move(caseName), s.label(),        core::cpuIsa(),     core::toString(n),
            int(shown.size()),   spreadOf(shown),  spreadOf(complete), spreadOf(predict),
            spreadOf(quantize),  spreadOf(sparse), spreadOf(metrics)};
  }
};

core::RunConfig configFor(core::Numerics n) {
  core::RunConfig c;
  c.setTarget(core::Target::Sm89);  // what the CLI and the GUI start with
  c.numerics = n;
  return c;
}

// Parameter changes on a causal entry whose dense outputs are cached, as a viewer's slider makes them: the
// deployed figures are on screen when onDeployed hands them out (or the run returns, for exact numerics).
// With `everyTile`, the engine runs every query tile of every change (CpuEngine::setKeepTiles(false)): its
// raw speed, without the rows a change leaves as they were.
Row timeChanges(const std::shared_ptr<const core::EntryData>& entry, const Shape& s, core::Numerics n,
                const CpuBenchOptions& o, bool everyTile) {
  core::CpuEngine engine(o.threads);
  engine.setKeepTiles(!everyTile);
  engine.setEntry(entry);
  core::RunConfig config = configFor(n);
  config.defaults.theta = -0.1;
  core::RunOptions first;
  engine.run(config, first);  // the dense outputs, cached for the changes
  Samples samples;
  for (int i = 0; i < o.changes; ++i) {
    config.defaults.tau = 0.90 + 0.003 * (i % 30);
    core::RunOptions ro;
    const auto t0 = Clock::now();
    double shownMs = -1;
    core::StageTimes shownTimes;
    ro.onDeployed = [&](std::shared_ptr<const core::EntryResult> early) {
      shownMs = msSince(t0);
      shownTimes = early->times;
      return true;
    };
    const core::EntryResult r = engine.run(config, ro);
    const double total = msSince(t0);
    samples.shown.push_back(shownMs >= 0 ? shownMs : total);
    samples.complete.push_back(total);
    samples.add(shownMs >= 0 ? shownTimes : r.times);
  }
  return samples.row(everyTile ? "changes, every tile" : "changes", s, n);
}

// First runs of a fresh engine with the dense reference and every error figure, as `sparge run` makes them.
Row timeFirstRuns(const std::shared_ptr<const core::EntryData>& entry, const Shape& s, core::Numerics n,
                  const CpuBenchOptions& o) {
  Samples samples;
  for (int i = 0; i < o.firstRuns; ++i) {
    core::CpuEngine engine(o.threads);
    engine.setEntry(entry);
    const auto t0 = Clock::now();
    const core::EntryResult r = engine.run(configFor(n), core::RunOptions{});
    samples.shown.push_back(msSince(t0));
    samples.complete.push_back(samples.shown.back());
    samples.add(r.times);
  }
  return samples.row("first-run", s, n);
}

std::shared_ptr<const core::EntryData> makeEntry(const Shape& s, bool causal) {
  core::SynthSpec spec;
  spec.name = "bench";
  spec.headsQ = spec.headsKV = s.heads;
  spec.tokensQ = spec.tokensKV = s.tokens;
  spec.headDim = spec.headDimV = s.dim;
  spec.causal = causal;
  // The viewer benchmark's entry (gui/bench) has segments of N/32 tokens; `sparge synth` 256.
  spec.segment = causal ? std::max<int64_t>(256, s.tokens / 32) : 256;
  return std::make_shared<const core::EntryData>(core::makeSyntheticEntry(spec));
}

std::string span(const Spread& s) {
  return fmtNum(s.median, 1) + " [" + fmtNum(s.min, 1) + "-" + fmtNum(s.max, 1) + "]";
}

nlohmann::json spreadJson(const Spread& s) {
  return {{"min_ms", s.min}, {"median_ms", s.median}, {"max_ms", s.max}};
}

nlohmann::json rowJson(const Row& r) {
  return {{"case", r.caseName},
          {"entry", r.entry},
          {"isa", r.isa},
          {"numerics", r.numerics},
          {"runs", r.runs},
          {"shown", spreadJson(r.shown)},
          {"complete", spreadJson(r.complete)},
          {"predict", spreadJson(r.predict)},
          {"quantize", spreadJson(r.quantize)},
          {"sparse", spreadJson(r.sparse)},
          {"metrics", spreadJson(r.metrics)}};
}

// The 1-minute load average (/proc/loadavg), or -1: other work on the machine shows in the wall times.
double loadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  return in >> load ? load : -1;
}

std::vector<std::string> variantsToTime(const CpuBenchOptions& o) {
  const std::vector<std::string> all = core::cpuIsaVariants();
  if (o.isa.size() == 1 && o.isa.front() == "all") return all;
  return o.isa;  // each is checked by useCpuIsa
}

}  // namespace

void addCpuBenchOptions(CLI::App& cmd, CpuBenchOptions& o) {
  cmd.add_option("--changes-entry", o.changesEntry,
                 "CPU: entry of the parameter-change case, HEADSxTOKENSxDIM, causal (default 9x2048x64, the "
                 "bundled sample's size)");
  cmd.add_option("--first-run-entry", o.firstRunEntry,
                 "CPU: entry of the first-run case, HEADSxTOKENSxDIM, not causal (default 12x4096x64)");
  cmd.add_option("--changes", o.changes, "CPU: parameter changes timed per numerics (default 30)")
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--first-runs", o.firstRuns, "CPU: first runs timed per numerics (default 5)")
      ->check(CLI::Range(1, 1000));
  cmd.add_option("--threads", o.threads, "CPU: engine threads (default 0: every core)")
      ->check(CLI::Range(0, 4096));
  cmd.add_option("--isa", o.isa,
                 "CPU: instruction-set variants to time, all (default: every one this CPU runs) or some of "
                 "avx512, avx2, x86-64")
      ->delimiter(',');
  cmd.add_option("--cases", o.cases, "CPU: changes, first-run (default both)")
      ->delimiter(',')
      ->check(CLI::IsMember({"changes", "first-run"}));
  cmd.add_option("--numerics", o.quant, "CPU: numerics to time (default int8-fp8,none)")
      ->delimiter(',')
      ->check(CLI::IsMember({"none", "int8-fp16", "int8-fp8"}));
}

int runCpuBench(const CpuBenchOptions& o) {
  const Shape changesShape = parseShape(o.changesEntry, "--changes-entry");
  const Shape firstShape = parseShape(o.firstRunEntry, "--first-run-entry");
  const std::vector<std::string> isas = variantsToTime(o);
  for (const std::string& isa : isas) core::useCpuIsa(isa);  // an unknown or unsupported one fails first
  const bool doChanges = std::find(o.cases.begin(), o.cases.end(), "changes") != o.cases.end();
  const bool doFirst = std::find(o.cases.begin(), o.cases.end(), "first-run") != o.cases.end();
  const std::string cpu = prof::queryDevice(0).hostCpu;
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = o.threads > 0 ? o.threads : cores;
  const double loadBefore = loadAverage();
  std::cout << "machine: " << (cpu.empty() ? "unknown CPU" : cpu) << ", " << cores
            << " logical cores, load average " << fmtNum(loadBefore, 2) << "; engine threads " << threads
            << "; variants this CPU runs:";
  for (const std::string& v : core::cpuIsaVariants()) std::cout << " " << v;
  std::cout
      << "\n(wall clock, ms: median [min-max]; \"shown\" = the deployed figures are out, \"complete\" = "
         "with the error split; stages are medians)\n";
  nlohmann::json out{
      {"schema", "sparge-cpu-bench/1"},  // bench/make_performance.py reads files of this schema
      {"machine", {{"cpu", cpu}, {"logical_cores", cores}, {"variants", core::cpuIsaVariants()}}},
      {"commit", SPARGE_BUILD_COMMIT},
      {"date", utcNow()},
      {"threads", threads},
      {"changes_entry", changesShape.label() + " causal"},
      {"first_run_entry", firstShape.label()},
      {"rows", nlohmann::json::array()}};
  Table table({"case", "entry", "isa", "numerics", "runs", "shown ms", "complete ms", "predict", "quantize",
               "sparse", "metrics"});
  const auto changesEntry = doChanges ? makeEntry(changesShape, true) : nullptr;
  const auto firstEntry = doFirst ? makeEntry(firstShape, false) : nullptr;
  for (const std::string& isa : isas) {
    core::useCpuIsa(isa);
    for (const std::string& q : o.quant) {
      const core::Numerics n = core::parseNumerics(q);
      std::vector<Row> rows;
      if (doChanges) {
        rows.push_back(timeChanges(changesEntry, changesShape, n, o, false));
        rows.push_back(timeChanges(changesEntry, changesShape, n, o, true));
      }
      if (doFirst) rows.push_back(timeFirstRuns(firstEntry, firstShape, n, o));
      for (const Row& r : rows) {
        table.row({r.caseName, r.entry, r.isa, r.numerics, std::to_string(r.runs), span(r.shown),
                   span(r.complete), fmtNum(r.predict.median, 1), fmtNum(r.quantize.median, 1),
                   fmtNum(r.sparse.median, 1), fmtNum(r.metrics.median, 1)});
        out["rows"].push_back(rowJson(r));
      }
    }
  }
  table.print(std::cout);
  const double loadAfter = loadAverage();
  std::cout << "load average after: " << fmtNum(loadAfter, 2) << "\n";
  out["load_average"] = {loadBefore, loadAfter};
  if (!o.json.empty()) {
    core::writeTextAtomically(o.json, out.dump(2) + "\n");
    std::cout << "wrote " << o.json << "\n";
  }
  return 0;
}

}  // namespace sparge::cli
