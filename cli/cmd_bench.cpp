// `sparge bench`: times the whole GPU call (Stage 1 + quantization + attention) and its parts on random
// device data over a sweep of sequence lengths, head dims, causal and top-k, next to our dense kernel and
// cuDNN's fused attention; prints a table and writes JSON.
#include <cfloat>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "cpu_bench.h"
#include "format.h"
#include "guards.h"
#include "job_support.h"
#include "method_options.h"
#include "option_checks.h"
#include "piece_job.h"
#include "rank_timings.h"
#include "sparge/build_info.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/core/types.h"
#include "sparge/profiler/profiler.h"
#include "sparge/profiler/report.h"

#ifdef SPARGE_HAVE_CUDA_KERNELS
#include "sparge/kernels/bench.h"
#endif

namespace sparge::cli {

using scaleout::encodeTimings;
using scaleout::jobTransport;
using scaleout::mergeTimings;
using scaleout::PieceJobHooks;
using scaleout::PieceJobSpec;
using scaleout::placeThisRank;
using scaleout::runPieceJob;

namespace {

struct BenchOptions {
  std::vector<int64_t> tokens{4096, 8192, 16384, 32768};
  std::vector<int64_t> dims{64, 128};
  std::vector<int> causal{0, 1};
  std::vector<double> topk{1.0, 0.5, 0.2, 0.1};
  int repeat = 10;
  int warmup = 2;
  int warmupMs = 200;
  int pauseMs = 0;
  int64_t heads = 32;
  int64_t batch = 1;
  std::string geometry;  // empty: the device's default
  std::string dtype = "float16";
  std::string quant = "none";
  double lambda = 50.0;
  bool noCudnn = false;
  std::string json;
  std::string timings;          // CUPTI kernel records of the whole sweep (.json | .csv | .trace.json)
  std::string kernel = "auto";  // Stage-2 family: auto (the launcher's choice), sm80 (mma.sync) or sm90
  std::string engine = "auto";  // auto: the CUDA kernels in a build that has them, else the CPU engine
  std::string methods;          // --method: block predictors whose Stage 1 is timed (comma-separated)
  MethodOptions methodOptions;  // their fixed options (--xattn-stride, ...)
  CpuBenchOptions cpu;
};

#ifdef SPARGE_HAVE_CUDA_KERNELS
// Where the figures come from: the GPU, the CUDA driver and runtime (API versions), and the SM clock the
// device reports as its maximum (the clock during the runs is not sampled here: `sparge run --timings`
// records it; tools/gpu scripts log nvidia-smi's driver version and clocks beside the file).
nlohmann::json machineJson() {
  const prof::DeviceInfo d = prof::queryDevice(0);
  const auto version = [](int v) {
    return v > 0 ? std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) : "";
  };
  nlohmann::json m;
  m["gpu"] = d.name;
  m["compute_capability"] = std::to_string(d.ccMajor) + "." + std::to_string(d.ccMinor);
  m["cuda_driver"] = version(d.driverVersion);
  m["cuda_runtime"] = version(d.runtimeVersion);
  m["max_sm_clock_mhz"] = d.maxSmClockKHz / 1000;
  return m;
}

nlohmann::json statsJson(const cuda::TimeStats& s) {
  return {{"median_ms", s.medianMs}, {"min_ms", s.minMs}, {"max_ms", s.maxMs}};
}

double tops(double flops, double ms) {
  return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0;
}

std::string span(const cuda::TimeStats& s) {
  return fmtNum(s.medianMs, 3) + " [" + fmtNum(s.minMs, 3) + "-" + fmtNum(s.maxMs, 3) + "]";
}

// The fastest dense time measured (ours or cuDNN's) and its name: what speedups are quoted against.
std::pair<double, std::string> bestDense(const cuda::BenchResult& r) {
  if (r.cudnnTimed && r.cudnn.medianMs < r.dense.medianMs) return {r.cudnn.medianMs, "cudnn"};
  return {r.dense.medianMs, "dense"};
}

nlohmann::json resultJson(const cuda::BenchResult& r) {
  const auto [bestMs, bestName] = bestDense(r);
  nlohmann::json jr;
  jr["tokens"] = r.config.tokens;
  jr["head_dim"] = r.config.headDim;
  jr["attention_kernel"] = r.attentionKernel;
  jr["causal"] = r.config.causal;
  jr["stage1"] = statsJson(r.stage1);
  jr["stage1_select"] = statsJson(r.stage1Select);
  jr["quantize"] = statsJson(r.quantize);
  jr["dense"] = statsJson(r.dense);
  jr["dense"]["tops"] = tops(r.denseFlops, r.dense.medianMs);
  jr["cudnn"] = r.cudnnTimed ? statsJson(r.cudnn) : nlohmann::json(nullptr);
  if (r.cudnnTimed) jr["cudnn"]["tops"] = tops(r.denseFlops, r.cudnn.medianMs);
  jr["cudnn_label"] = r.cudnnLabel;
  jr["best_dense"] = bestName;
  jr["dense_flops"] = r.denseFlops;
  jr["stage1_over_dense"] = r.stage1.medianMs / r.dense.medianMs;
  jr["methods"] = nlohmann::json::array();
  for (const auto& m : r.methods) {
    nlohmann::json jm;
    jm["method"] = core::toString(m.method);
    if (m.method == core::Method::XAttention) jm["stride"] = r.config.methodParams.xattention.stride;
    jm["stage1"] = statsJson(m.stage1);
    jm["stage1_select"] = statsJson(m.select);
    jm["stage1_over_dense"] = m.stage1.medianMs / r.dense.medianMs;
    jm["density"] = m.density;
    jr["methods"].push_back(jm);
  }
  jr["sparse"] = nlohmann::json::array();
  for (const auto& s : r.sparse) {
    const double executed =
        (double(s.selectedBlocks) + double(s.selectedBlocks - s.skippedPvBlocks)) * (r.blockFlops / 2);
    nlohmann::json js;
    js["topk"] = s.topk;
    js["call"] = statsJson(s.call);
    js["stage2"] = statsJson(s.stage2);
    js["valid_blocks"] = s.validBlocks;
    js["selected_blocks"] = s.selectedBlocks;
    js["skipped_pv_blocks"] = s.skippedPvBlocks;
    js["density"] = s.density();
    js["sparsity"] = 1.0 - s.density();
    js["dense_equivalent_tops"] = tops(r.denseFlops, s.call.medianMs);
    js["dense_equivalent_tops_min_max"] = {tops(r.denseFlops, s.call.maxMs),
                                           tops(r.denseFlops, s.call.minMs)};
    js["executed_tops"] = tops(executed, s.call.medianMs);
    js["stage2_over_dense"] = s.stage2.medianMs / r.dense.medianMs;
    js["speedup_over_best_dense"] = bestMs / s.call.medianMs;
    js["speedup_over_dense"] = r.dense.medianMs / s.call.medianMs;
    jr["sparse"].push_back(js);
  }
  return jr;
}

// The table rows of one point (one per top-k), as text, so that they can travel to rank 0.
std::vector<std::vector<std::string>> tableRows(const cuda::BenchResult& r) {
  const auto [bestMs, bestName] = bestDense(r);
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : r.sparse) {
    const double executed =
        (double(s.selectedBlocks) + double(s.selectedBlocks - s.skippedPvBlocks)) * (r.blockFlops / 2);
    rows.push_back(
        {std::to_string(r.config.tokens), std::to_string(r.config.headDim), r.attentionKernel,
         r.config.causal ? "yes" : "no", fmtNum(s.topk, 2), fmtPct(s.density()), span(s.call),
         fmtNum(r.stage1.medianMs, 3), fmtPct(r.stage1.medianMs / r.dense.medianMs),
         fmtNum(r.quantize.medianMs, 3), fmtNum(s.stage2.medianMs, 3), fmtNum(r.dense.medianMs, 3),
         r.cudnnTimed ? fmtNum(r.cudnn.medianMs, 3) : "-", fmtNum(tops(r.denseFlops, s.call.medianMs), 1),
         fmtNum(tops(executed, s.call.medianMs), 1), fmtNum(bestMs / s.call.medianMs, 2) + "x " + bestName});
  }
  return rows;
}

// Stage 1 of each method timed (SpargeAttn's from the main measurement) beside the dense walk, as text rows.
std::vector<std::vector<std::string>> methodRows(const cuda::BenchResult& r) {
  std::vector<std::vector<std::string>> rows;
  auto row = [&](const std::string& name, const cuda::TimeStats& fresh, const cuda::TimeStats& select,
                 const std::string& density) {
    rows.push_back({std::to_string(r.config.tokens), std::to_string(r.config.headDim),
                    r.config.causal ? "yes" : "no", name, span(fresh), fmtNum(select.medianMs, 3),
                    fmtNum(r.dense.medianMs, 3), fmtPct(fresh.medianMs / r.dense.medianMs), density});
  };
  for (const auto& m : r.methods) {
    std::string name = core::toString(m.method);
    if (m.method == core::Method::XAttention)
      name += " S=" + std::to_string(r.config.methodParams.xattention.stride);
    row(name, m.stage1, m.select, fmtPct(m.density));
  }
  return rows;
}

cuda::BenchCase makeCase(const BenchOptions& o, int64_t n, int64_t d, int c, const core::Geometry& g,
                         core::DType dt) {
  cuda::BenchCase bc;
  bc.batch = o.batch;
  bc.heads = o.heads;
  bc.tokens = n;
  bc.headDim = d;
  bc.causal = c != 0;
  bc.topks = o.topk;
  bc.geometry = g;
  bc.dtype = dt;
  bc.numerics = core::parseNumerics(o.quant);
  bc.lambda = o.lambda;
  bc.repeat = o.repeat;
  bc.warmup = o.warmup;
  bc.warmupMs = o.warmupMs;
  bc.pauseMs = o.pauseMs;
  bc.cudnn = !o.noCudnn;
  bc.mmaSyncOnly = o.kernel == "sm80";  // "sm90" is as "auto": the launcher never runs it where it cannot
  if (!o.methods.empty())
    for (core::Method m : core::parseMethodList(o.methods, "--method"))
      if (m != core::Method::SpargeAttn) bc.methods.push_back(m);
  o.methodOptions.applyEach(bc.methodParams);
  return bc;
}

void printKernelRecords(const prof::TimingReport& report, const std::string& path) {
  std::cout << "kernel records: " << report.clock << " (" << report.sourceReason << ")\n";
  Table kt(
      {"kernel", "stage", "grid", "block", "regs", "smem B", "launches", "min ms", "median ms", "max ms"});
  for (const prof::KernelStat& k : report.kernels)
    kt.row({k.name.substr(0, 60), prof::toString(k.stage), k.launch.gridLabel(), k.launch.blockLabel(),
            std::to_string(k.launch.registersPerThread),
            std::to_string(k.launch.staticSharedBytes + k.launch.dynamicSharedBytes),
            std::to_string(k.ms.count), fmtNum(k.ms.min, 3), fmtNum(k.ms.median, 3), fmtNum(k.ms.max, 3)});
  kt.print(std::cout);
  prof::writeTimings(report, path);
  std::cout << "wrote " << path << "\n";
}

core::DType parseDType(const std::string& text) {
  if (text == "float16" || text == "fp16") return core::DType::Float16;
  if (text == "bfloat16" || text == "bf16") return core::DType::BFloat16;
  throw Error("--dtype", "expected float16 or bfloat16, got '" + text + "'");
}

// One point of the sweep.
struct BenchPoint {
  int64_t tokens = 0, dim = 0;
  int causal = 0;
};

std::vector<BenchPoint> sweepOf(const BenchOptions& o) {
  std::vector<BenchPoint> points;
  for (int64_t n : o.tokens)
    for (int64_t d : o.dims)
      for (int c : o.causal) points.push_back({n, d, c});
  return points;
}

// The sweep as a job: each point is a unit (cost ~ N²·D, halved when causal), never split; with several
// ranks (mpirun) each point runs on one rank's GPU and rank 0 prints and writes everything in order.
PieceJobSpec benchJobSpec(const std::vector<BenchPoint>& points) {
  PieceJobSpec spec;
  spec.splitHeads = false;
  spec.verb = "bench";
  for (const BenchPoint& p : points) {
    spec.units.push_back({double(p.tokens) * double(p.tokens) * double(p.dim) * (p.causal ? 0.5 : 1.0), {0}});
    spec.names.push_back("N=" + std::to_string(p.tokens) + " D=" + std::to_string(p.dim) +
                         (p.causal ? " causal" : ""));
  }
  return spec;
}

// A rank of the bench job: its GPU and CUPTI collector; on rank 0 the JSON and the table in sweep order.
struct BenchRun {
  explicit BenchRun(const BenchOptions& options)
      : o(options), points(sweepOf(options)), dtype(parseDType(options.dtype)) {}

  scaleout::RankInfo start() {
    placeThisRank(jobTransport(), 0);  // only its GPU matters: bench has no engine
    device = cuda::benchDeviceName();  // throws when no GPU is usable
    geometry = o.geometry.empty() ? cuda::benchDefaultGeometry() : core::Geometry::parse(o.geometry);
    // The CUPTI collector records every kernel of the sweep (one profiler run per configuration) as an
    // independent cross-check of the CUDA-event table, attributed to stages by kernel name.
    if (!o.timings.empty()) profiler = std::make_unique<prof::Profiler>(prof::ProfilerOptions{});
    if (jobTransport().rank() == 0) {
      out = header();
      std::cout << "device: " << device << ", geometry " << geometry.label() << ", " << o.dtype
                << ", numerics " << o.quant << ", kernel " << o.kernel << ", B=" << o.batch
                << " H=" << o.heads << ", repeat " << o.repeat << " after " << o.warmup << "+ runs and "
                << o.warmupMs << "+ ms of warm-up, pause " << o.pauseMs << " ms"
                << " (CUDA events; call = Stage 1 + quantization + attention, median [min-max])\n";
    }
    scaleout::RankInfo info;
    info.engine = device;
    info.device = "GPU";
    return info;
  }

  nlohmann::json header() const {
    nlohmann::json h;
    h["schema"] = "sparge-bench/1";  // bench/make_performance.py reads files of this schema
    h["machine"] = machineJson();
    h["commit"] = SPARGE_BUILD_COMMIT;
    h["date"] = utcNow();
    h["device"] = device;
    h["clock"] = "cuda-event";
    h["geometry"] = geometry.label();
    h["dtype"] = o.dtype;
    h["numerics"] = o.quant;
    h["heads"] = o.heads;
    h["batch"] = o.batch;
    h["repeat"] = o.repeat;
    h["warmup"] = o.warmup;
    h["warmup_ms"] = o.warmupMs;
    h["pause_ms"] = o.pauseMs;
    h["lambda"] = o.lambda;
    h["kernel"] = o.kernel;
    h["flops_rule"] =
        "4*B*H*Nq*Nkv*D / t, halved when causal (dense-equivalent); executed counts only computed blocks; t "
        "is "
        "the whole call (Stage 1 + quantization + attention)";
    h["results"] = nlohmann::json::array();
    return h;
  }

  // Times one point on this rank's GPU; its JSON row and table rows, for rank 0.
  std::string runPoint(size_t unit) {
    const BenchPoint& p = points[unit];
    std::unique_ptr<prof::ProfileScope> scope;
    if (profiler) {
      prof::RunInfo info;
      info.entry =
          "bench N=" + std::to_string(p.tokens) + " D=" + std::to_string(p.dim) + (p.causal ? " causal" : "");
      info.heads = "all";
      info.params = geometry.label() + " " + o.quant;
      info.engine = device;
      info.otherKernels = prof::Stage::Cudnn;  // the only kernels without our prefix are cuDNN's
      scope = std::make_unique<prof::ProfileScope>(*profiler, info);
    }
    const cuda::BenchResult r = cuda::runBench(makeCase(o, p.tokens, p.dim, p.causal, geometry, dtype));
    if (scope) scope->end();
    nlohmann::json payload;
    payload["result"] = resultJson(r);
    payload["rows"] = tableRows(r);
    payload["method_rows"] = methodRows(r);
    payload["cudnn_label"] = r.cudnnLabel;
    if (jobTransport().size() > 1) {  // rows measured on several GPUs say where
      payload["result"]["rank"] = jobTransport().rank();
      payload["result"]["device"] = device;
    }
    return payload.dump();
  }

  PieceJobHooks hooks() {
    PieceJobHooks h;
    h.start = [this] { return start(); };
    h.run = [this](size_t unit, const std::vector<int64_t>&, bool) { return runPoint(unit); };
    h.final = [this] { return profiler ? encodeTimings(profiler->collect()) : std::string(); };
    h.unitDone = [this](size_t, std::vector<std::string>& parts) {
      const nlohmann::json p = nlohmann::json::parse(parts.at(0));
      out["results"].push_back(p["result"]);
      for (const auto& row : p["rows"]) table.row(row.get<std::vector<std::string>>());
      for (const auto& row : p["method_rows"]) {
        methodTable.row(row.get<std::vector<std::string>>());
        anyMethod = true;
      }
      cudnnNote = p["cudnn_label"].get<std::string>();
    };
    h.finals = [this](std::vector<std::string>& payloads) {
      if (profiler) timings = mergeTimings(payloads);
    };
    return h;
  }

  const BenchOptions& o;
  std::vector<BenchPoint> points;
  core::DType dtype;
  std::string device;
  core::Geometry geometry;
  std::unique_ptr<prof::Profiler> profiler;
  nlohmann::json out;  // rank 0
  Table table{{"N", "D", "kernel", "causal", "topk", "density", "call ms", "stage1 ms", "s1/dense",
               "quant ms", "attn ms", "dense ms", "cudnn ms", "eq TOPS", "exec TOPS", "vs best dense"}};
  // Stage 1 of each --method (fresh: statistics not cached; select: cached) and its share of the dense walk.
  Table methodTable{
      {"N", "D", "causal", "method", "stage1 ms", "select ms", "dense ms", "s1/dense", "density"}};
  bool anyMethod = false;
  std::string cudnnNote;
  prof::ReportInput timings;  // rank 0: every rank's kernel records
};

int runBenchCommand(const BenchOptions& o) {
  BenchRun run(o);
  const int code = runPieceJob(jobTransport(), benchJobSpec(run.points), run.hooks());
  if (code != 0 || jobTransport().rank() != 0) return code;
  run.table.print(std::cout);
  std::cout << "dense baseline: " << run.cudnnNote << "\n";
  if (run.anyMethod) {
    std::cout
        << "Stage 1 of the block predictors (median [min-max] of the repeats; s1/dense: the fresh Stage 1 "
           "over the dense walk):\n";
    run.methodTable.print(std::cout);
  }
  if (run.profiler) printKernelRecords(prof::buildReport(run.timings), o.timings);
  if (!o.json.empty()) {
    core::writeTextAtomically(o.json, run.out.dump(2) + "\n");
    std::cout << "wrote " << o.json << "\n";
  }
  return 0;
}
#endif

// What `sparge bench` does once its options are parsed: the CPU engine's benchmark, or the CUDA kernels'.
int runBenchAction(BenchOptions& o) {
  checkOutputs({{"--json", o.json}, {"--timings", o.timings}}, {});  // before minutes on the GPU
#ifdef SPARGE_HAVE_CUDA_KERNELS
  const bool cpu = o.engine == "cpu";
#else
  const bool cpu = o.engine != "cuda";
#endif
  if (!o.methods.empty()) {
    core::parseMethodList(o.methods, "--method");  // a bad name fails here, before the GPU starts
    if (cpu) throw Error("--method", "times Stage 1 on the GPU: not with the CPU engine (--engine cuda)");
  }
  if (cpu) {
    o.cpu.json = o.json;
    return runCpuBench(o.cpu);
  }
#ifdef SPARGE_HAVE_CUDA_KERNELS
  for (int64_t d : o.dims)
    if (d != 64 && d != 128 && d != 256) throw Error("--dims", "head dims must be 64, 128 or 256");
  for (double k : o.topk)
    if (!(k > 0 && k <= 1)) throw Error("--topk", "top-k fractions must be in (0, 1]");
  return runBenchCommand(o);
#else
  std::cerr << "sparge bench: this build has no CUDA engine (configured without a CUDA compiler); "
               "--engine cpu times the CPU engine\n";
  return 1;
#endif
}

}  // namespace

void registerBench(CLI::App& app, Action& action) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time the CUDA kernels on random data (needs a GPU), or the CPU engine (--engine cpu)");
  cmd->add_option("--engine", o->engine,
                  "auto (the CUDA kernels when this build has them, else the CPU engine), cuda or cpu; the "
                  "options marked CPU apply to the CPU engine only")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  addCpuBenchOptions(*cmd, o->cpu);
  cmd->add_option("--tokens", o->tokens, "Sequence lengths (Nq = Nkv)")
      ->delimiter(',')
      ->check(integerIn(1, core::kMaxDimension));
  cmd->add_option("--dims", o->dims, "Head dims (64, 128, 256)")->delimiter(',')->check(integerIn(64, 256));
  cmd->add_option("--topk", o->topk, "Top-k fractions, in (0, 1]")->delimiter(',')->check(realIn(0, 1));
  cmd->add_option("--causal", o->causal, "Causal values to sweep (0, 1)")
      ->delimiter(',')
      ->check(integerIn(0, 1));
  cmd->add_option("--repeat", o->repeat, "Timed repetitions per measurement")->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", o->warmup, "Untimed runs before timing, at least (default 2)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--warmup-ms", o->warmupMs,
                  "Untimed running before timing, at least this many milliseconds: every measurement then "
                  "starts in the state sustained load leaves the GPU in (default 200; 0: runs only)")
      ->check(CLI::Range(0, 600000));
  cmd->add_option(
         "--pause-ms", o->pauseMs,
         "Idle milliseconds before each timed measurement, so that none inherits the state a heavy one "
         "before it leaves (default 0)")
      ->check(CLI::Range(0, 60000));
  cmd->add_option("--heads", o->heads, "Heads (H)")->check(CLI::Range(1, 4096));
  cmd->add_option("--batch", o->batch, "Batch (B)")->check(CLI::Range(1, 4096));
  cmd->add_option("--geometry", o->geometry, "Tile geometry 128x64 or 64x128 (default: 64x128 on sm90)");
  cmd->add_option("--dtype", o->dtype, "float16 or bfloat16");
  cmd->add_option("--quant", o->quant, "Numerics of the attention: none, int8-fp16 or int8-fp8")
      ->check(CLI::IsMember({"none", "int8-fp16", "int8-fp8"}))
      ->capture_default_str();
  cmd->add_option("--lambda", o->lambda, "PV-skip threshold λ (pvthreshd)")->check(realIn(0, DBL_MAX));
  cmd->add_option(
      "--method", o->methods,
      "Also time Stage 1 of these block predictors (comma-separated: xattention, moba, ...) beside "
      "the dense walk, with their default parameters and the fixed options below");
  addMethodFixedOptions(*cmd, o->methodOptions);
  cmd->add_option(
         "--moba-topk", o->methodOptions.mobaTopk,
         "MoBA: key blocks per query token, its own included (default 3; above 9 the gate chooses by "
         "bisecting the scores' bits)")
      ->check(CLI::Range(int64_t(1), int64_t(1000000000)));
  cmd->add_flag("--no-cudnn", o->noCudnn, "Do not time cuDNN's fused attention next to our dense kernel");
  cmd->add_option("--json", o->json, "Write the results as JSON to this file");
  cmd->add_option(
         "--kernel", o->kernel,
         "Stage-2 kernel: auto (the Hopper kernel at D 64/128 on an sm_90 GPU for 64x128 tiles, and for "
         "128x64 without quantization; else mma.sync; the table's kernel column says which ran), sm80 "
         "(mma.sync always) or sm90 (as auto)")
      ->check(CLI::IsMember({"auto", "sm80", "sm90"}))
      ->capture_default_str();
  cmd->add_option("--timings", o->timings,
                  "Also record every kernel with the CUPTI collector and write it (.json, .csv, .trace.json)")
      ->check(outputFormats(kTimingFormats));
  cmd->callback([o, &action] { action = [o]() -> int { return runBenchAction(*o); }; });
}

}  // namespace sparge::cli
