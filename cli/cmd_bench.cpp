// `sparge bench`: times the CUDA kernels (Stage 1, Stage 2 per top-k, dense path) on random device
// data over a sweep of sequence lengths, head dims, causal and top-k; prints a table and writes JSON.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "dist_timings.h"
#include "format.h"
#include "job_support.h"
#include "piece_job.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/profiler/profiler.h"

#ifdef SPARGE_HAVE_CUDA_KERNELS
#include "sparge/kernels/bench.h"
#endif

namespace sparge::cli {

namespace {

struct BenchOptions {
  std::vector<int64_t> tokens{4096, 8192, 16384, 32768};
  std::vector<int64_t> dims{64, 128};
  std::vector<int> causal{0, 1};
  std::vector<double> topk{1.0, 0.5, 0.2, 0.1};
  int repeat = 10;
  int warmup = 2;
  int64_t heads = 32;
  int64_t batch = 1;
  std::string geometry;  // empty: the device's default
  std::string dtype = "float16";
  double lambda = 50.0;
  std::string json;
  std::string timings;  // CUPTI kernel records of the whole sweep (.json | .csv | .trace.json)
  std::string kernel = "sm80";  // Stage-2 kernel family: sm80 (mma.sync) or sm90 (wgmma, 64x128 only)
};

#ifdef SPARGE_HAVE_CUDA_KERNELS
nlohmann::json statsJson(const cuda::TimeStats& s) {
  return {{"median_ms", s.medianMs}, {"min_ms", s.minMs}, {"max_ms", s.maxMs}};
}

// One point of the sweep.
struct BenchPoint {
  int64_t tokens = 0, dim = 0;
  bool causal = false;
};

std::vector<BenchPoint> sweepOf(const BenchOptions& o) {
  std::vector<BenchPoint> points;
  for (int64_t n : o.tokens)
    for (int64_t d : o.dims)
      for (int c : o.causal) points.push_back({n, d, c != 0});
  return points;
}

// Times one point on this process's GPU; the row of the JSON output.
nlohmann::json benchPoint(const BenchOptions& o, const core::Geometry& g, core::DType dt,
                          const BenchPoint& pt, prof::Profiler* profiler, const std::string& device) {
  std::unique_ptr<prof::ProfileScope> scope;
  if (profiler) {
    prof::RunInfo info;
    info.entry = "bench N=" + std::to_string(pt.tokens) + " D=" + std::to_string(pt.dim) +
                 (pt.causal ? " causal" : "");
    info.heads = "all";
    info.params = g.label();
    info.engine = device;
    scope = std::make_unique<prof::ProfileScope>(*profiler, info);
  }
  cuda::BenchCase bc;
  bc.batch = o.batch;
  bc.heads = o.heads;
  bc.tokens = pt.tokens;
  bc.headDim = pt.dim;
  bc.causal = pt.causal;
  bc.topks = o.topk;
  bc.geometry = g;
  bc.dtype = dt;
  bc.lambda = o.lambda;
  bc.repeat = o.repeat;
  bc.warmup = o.warmup;
  cuda::BenchResult r = cuda::runBench(bc);
  nlohmann::json jr;
  jr["tokens"] = pt.tokens;
  jr["head_dim"] = pt.dim;
  jr["causal"] = pt.causal;
  jr["stage1"] = statsJson(r.stage1);
  jr["stage1_select"] = statsJson(r.stage1Select);
  jr["dense"] = statsJson(r.dense);
  jr["dense"]["tops"] = r.denseFlops / (r.dense.medianMs * 1e-3) / 1e12;
  jr["dense_flops"] = r.denseFlops;
  jr["stage1_over_dense"] = r.stage1.medianMs / r.dense.medianMs;
  jr["sparse"] = nlohmann::json::array();
  for (const auto& s : r.sparse) {
    const double sec = s.stage2.medianMs * 1e-3;
    const double exec = (double(s.selectedBlocks) + double(s.selectedBlocks - s.skippedPvBlocks)) *
                        (r.blockFlops / 2) / sec / 1e12;
    nlohmann::json js;
    js["topk"] = s.topk;
    js["stage2"] = statsJson(s.stage2);
    js["valid_blocks"] = s.validBlocks;
    js["selected_blocks"] = s.selectedBlocks;
    js["skipped_pv_blocks"] = s.skippedPvBlocks;
    js["density"] = s.density();
    js["sparsity"] = 1.0 - s.density();
    js["dense_equivalent_tops"] = r.denseFlops / sec / 1e12;
    js["executed_tops"] = exec;
    js["stage2_over_dense"] = s.stage2.medianMs / r.dense.medianMs;
    jr["sparse"].push_back(js);
  }
  if (scope) scope->end();
  return jr;
}

// The table rows of one JSON row (one per top-k).
void addRows(Table& t, const nlohmann::json& jr) {
  const double denseMs = jr["dense"]["median_ms"].get<double>();
  const double stage1Ms = jr["stage1"]["median_ms"].get<double>();
  for (const nlohmann::json& s : jr["sparse"]) {
    const double stage2Ms = s["stage2"]["median_ms"].get<double>();
    t.row({std::to_string(jr["tokens"].get<int64_t>()), std::to_string(jr["head_dim"].get<int64_t>()),
           jr["causal"].get<bool>() ? "yes" : "no", fmtNum(s["topk"].get<double>(), 2),
           fmtPct(s["density"].get<double>()), fmtNum(stage1Ms, 3), fmtPct(stage1Ms / denseMs),
           fmtNum(jr["stage1_select"]["median_ms"].get<double>(), 3), fmtNum(stage2Ms, 3), fmtNum(denseMs, 3),
           fmtNum(stage2Ms / denseMs, 3), fmtNum(s["dense_equivalent_tops"].get<double>(), 1),
           fmtNum(s["executed_tops"].get<double>(), 1), fmtNum(jr["dense"]["tops"].get<double>(), 1)});
  }
}

core::DType parseDType(const std::string& text) {
  if (text == "float16" || text == "fp16") return core::DType::Float16;
  if (text == "bfloat16" || text == "bf16") return core::DType::BFloat16;
  throw Error("--dtype", "expected float16 or bfloat16, got '" + text + "'");
}

// What a rank of the bench job keeps: its GPU, and on rank 0 the rows in sweep order.
struct BenchRun {
  explicit BenchRun(const BenchOptions& options)
      : o(options), points(sweepOf(options)), dtype(parseDType(options.dtype)) {}

  const BenchOptions& o;
  std::vector<BenchPoint> points;
  core::DType dtype;
  std::string device;
  core::Geometry geometry;
  std::unique_ptr<prof::Profiler> profiler;
  nlohmann::json out;
  Table table{{"N", "D", "causal", "topk", "density", "stage1 ms", "s1/dense", "select ms", "stage2 ms",
               "dense ms", "s2/dense", "eq TOPS", "exec TOPS", "dense TOPS"}};
  prof::ReportInput timings;

  dist::RankInfo start() {
    placeOnGpu(jobTransport());
    device = cuda::benchDeviceName();  // throws when no GPU is usable
    geometry = o.geometry.empty() ? cuda::benchDefaultGeometry() : core::Geometry::parse(o.geometry);
    // The CUPTI collector records every kernel of the sweep (one profiler run per point) as an independent
    // cross-check of the CUDA-event table, attributed to stages by kernel name.
    if (!o.timings.empty()) profiler = std::make_unique<prof::Profiler>(prof::ProfilerOptions{});
    if (jobTransport().rank() == 0) {
      out = header();
      std::cout << "device: " << device << ", geometry " << geometry.label() << ", " << o.dtype << ", kernel "
                << o.kernel << ", B=" << o.batch << " H=" << o.heads << ", repeat " << o.repeat
                << " (CUDA events, median [min-max])\n";
    }
    dist::RankInfo info;
    info.engine = device;
    info.device = "GPU";
    return info;
  }

  nlohmann::json header() const {
    nlohmann::json h;
    h["device"] = device;
    h["clock"] = "cuda-event";
    h["geometry"] = geometry.label();
    h["dtype"] = o.dtype;
    h["heads"] = o.heads;
    h["batch"] = o.batch;
    h["repeat"] = o.repeat;
    h["lambda"] = o.lambda;
    h["kernel"] = o.kernel;
    h["flops_rule"] =
        "4*B*H*Nq*Nkv*D / t, halved when causal (dense-equivalent); executed counts only computed blocks";
    h["results"] = nlohmann::json::array();
    return h;
  }

  PieceJobHooks hooks() {
    PieceJobHooks h;
    h.start = [this] { return start(); };
    h.run = [this](size_t unit, const std::vector<int64_t>&, bool) {
      nlohmann::json jr = benchPoint(o, geometry, dtype, points[unit], profiler.get(), device);
      // Rows measured by other ranks say where they were measured.
      if (jobTransport().size() > 1) {
        jr["rank"] = jobTransport().rank();
        jr["device"] = device;
      }
      return jr.dump();
    };
    h.final = [this] { return profiler ? encodeTimings(profiler->collect()) : std::string(); };
    h.unitDone = [this](size_t, std::vector<std::string>& parts) {
      const nlohmann::json jr = nlohmann::json::parse(parts.at(0));
      addRows(table, jr);
      out["results"].push_back(jr);
    };
    h.finals = [this](std::vector<std::string>& payloads) {
      if (profiler) timings = mergeTimings(payloads);
    };
    return h;
  }
};

// The sweep as a job: each point is a unit (cost ~ N²·D, halved when causal), never split.
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

int runBenchCommand(const BenchOptions& o) {
  BenchRun run(o);
  const int code = runPieceJob(jobTransport(), benchJobSpec(run.points), run.hooks());
  if (code != 0 || jobTransport().rank() != 0) return code;
  run.table.print(std::cout);
  if (run.profiler) {
    const prof::TimingReport report = prof::buildReport(run.timings);
    std::cout << "kernel records: " << report.clock << " (" << report.sourceReason << ")\n";
    Table kt({"kernel", "stage", "launches", "min ms", "median ms", "max ms"});
    for (const prof::KernelStat& k : report.kernels)
      kt.row({k.name.substr(0, 60), prof::toString(k.stage), std::to_string(k.ms.count), fmtNum(k.ms.min, 3),
              fmtNum(k.ms.median, 3), fmtNum(k.ms.max, 3)});
    kt.print(std::cout);
    prof::writeTimings(report, o.timings);
    std::cout << "wrote " << o.timings << "\n";
  }
  if (!o.json.empty()) {
    core::writeTextAtomically(o.json, run.out.dump(2) + "\n");
    std::cout << "wrote " << o.json << "\n";
  }
  return 0;
}
#endif

}  // namespace

void registerBench(CLI::App& app, Action& action) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Time the CUDA kernels on random data (needs a GPU)");
  cmd->add_option("--tokens", o->tokens, "Sequence lengths (Nq = Nkv)")->delimiter(',');
  cmd->add_option("--dims", o->dims, "Head dims (64, 128)")->delimiter(',');
  cmd->add_option("--topk", o->topk, "Top-k fractions")->delimiter(',');
  cmd->add_option("--causal", o->causal, "Causal values to sweep (0, 1)")->delimiter(',');
  cmd->add_option("--repeat", o->repeat, "Timed repetitions per measurement")->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", o->warmup, "Untimed runs before timing")->check(CLI::Range(0, 1000));
  cmd->add_option("--heads", o->heads, "Heads (H)")->check(CLI::Range(1, 4096));
  cmd->add_option("--batch", o->batch, "Batch (B)")->check(CLI::Range(1, 4096));
  cmd->add_option("--geometry", o->geometry, "Tile geometry 128x64 or 64x128 (default: 64x128 on sm90)");
  cmd->add_option("--dtype", o->dtype, "float16 or bfloat16");
  cmd->add_option("--lambda", o->lambda, "PV-skip threshold λ (pvthreshd)");
  cmd->add_option("--json", o->json, "Write the results as JSON to this file");
  cmd->add_option("--kernel", o->kernel,
                  "Stage-2 kernel: sm80 (mma.sync) or sm90 (wgmma; used only for 64x128 on an sm_90 GPU)")
      ->check(CLI::IsMember({"sm80", "sm90"}));
  cmd->add_option("--timings", o->timings,
                  "Also record every kernel with the CUPTI collector and write it (.json, .csv, .trace.json)");
  cmd->callback([o, &action] {
    action = [o]() -> int {
#ifdef SPARGE_HAVE_CUDA_KERNELS
      for (int64_t d : o->dims)
        if (d != 64 && d != 128) throw Error("--dims", "head dims must be 64 or 128");
      for (double k : o->topk)
        if (!(k > 0 && k <= 1)) throw Error("--topk", "top-k fractions must be in (0, 1]");
      // The launcher reads SPARGE_ATTN_KERNEL at every Stage-2 launch.
      setenv("SPARGE_ATTN_KERNEL", o->kernel.c_str(), 1);
      return runBenchCommand(*o);
#else
      std::cerr << "sparge bench: this build has no CUDA engine (configured without a CUDA compiler); "
                   "benchmarks need a GPU build\n";
      return 1;
#endif
    };
  });
}

}  // namespace sparge::cli
