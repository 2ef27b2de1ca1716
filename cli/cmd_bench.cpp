// `sparge bench`: times the CUDA kernels (Stage 1, Stage 2 per top-k, dense path) on random device
// data over a sweep of sequence lengths, head dims, causal and top-k; prints a table and writes JSON.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"
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

int runBenchCommand(const BenchOptions& o) {
  std::string device;
  try {
    device = cuda::benchDeviceName();
  } catch (const Error& e) {
    std::cerr << "sparge bench: " << e.problem() << "\n";
    return 1;
  }
  core::Geometry g = o.geometry.empty() ? cuda::benchDefaultGeometry() : core::Geometry::parse(o.geometry);
  core::DType dt;
  if (o.dtype == "float16" || o.dtype == "fp16")
    dt = core::DType::Float16;
  else if (o.dtype == "bfloat16" || o.dtype == "bf16")
    dt = core::DType::BFloat16;
  else
    throw Error("--dtype", "expected float16 or bfloat16, got '" + o.dtype + "'");

  nlohmann::json out;
  out["device"] = device;
  out["clock"] = "cuda-event";
  out["geometry"] = g.label();
  out["dtype"] = o.dtype;
  out["heads"] = o.heads;
  out["batch"] = o.batch;
  out["repeat"] = o.repeat;
  out["lambda"] = o.lambda;
  out["kernel"] = o.kernel;
  out["flops_rule"] =
      "4*B*H*Nq*Nkv*D / t, halved when causal (dense-equivalent); executed counts only computed blocks";
  out["results"] = nlohmann::json::array();

  std::cout << "device: " << device << ", geometry " << g.label() << ", " << o.dtype << ", kernel " << o.kernel << ", B=" << o.batch
            << " H=" << o.heads << ", repeat " << o.repeat << " (CUDA events, median [min-max])\n";
  Table t({"N", "D", "causal", "topk", "density", "stage1 ms", "s1/dense", "select ms", "stage2 ms",
           "dense ms", "s2/dense", "eq TOPS", "exec TOPS", "dense TOPS"});
  // The CUPTI collector records every kernel of the sweep (one profiler run per configuration) as an
  // independent cross-check of the CUDA-event table, attributed to stages by kernel name.
  std::unique_ptr<prof::Profiler> profiler;
  if (!o.timings.empty()) profiler = std::make_unique<prof::Profiler>(prof::ProfilerOptions{});
  for (int64_t n : o.tokens)
    for (int64_t d : o.dims)
      for (int c : o.causal) {
        std::unique_ptr<prof::ProfileScope> scope;
        if (profiler) {
          prof::RunInfo info;
          info.entry = "bench N=" + std::to_string(n) + " D=" + std::to_string(d) + (c ? " causal" : "");
          info.heads = "all";
          info.params = g.label();
          info.engine = device;
          scope = std::make_unique<prof::ProfileScope>(*profiler, info);
        }
        cuda::BenchCase bc;
        bc.batch = o.batch;
        bc.heads = o.heads;
        bc.tokens = n;
        bc.headDim = d;
        bc.causal = c != 0;
        bc.topks = o.topk;
        bc.geometry = g;
        bc.dtype = dt;
        bc.lambda = o.lambda;
        bc.repeat = o.repeat;
        bc.warmup = o.warmup;
        cuda::BenchResult r = cuda::runBench(bc);
        const double denseTops = r.denseFlops / (r.dense.medianMs * 1e-3) / 1e12;
        nlohmann::json jr;
        jr["tokens"] = n;
        jr["head_dim"] = d;
        jr["causal"] = bc.causal;
        jr["stage1"] = statsJson(r.stage1);
        jr["stage1_select"] = statsJson(r.stage1Select);
        jr["dense"] = statsJson(r.dense);
        jr["dense"]["tops"] = denseTops;
        jr["dense_flops"] = r.denseFlops;
        jr["stage1_over_dense"] = r.stage1.medianMs / r.dense.medianMs;
        jr["sparse"] = nlohmann::json::array();
        for (const auto& s : r.sparse) {
          const double sec = s.stage2.medianMs * 1e-3;
          const double exec = (double(s.selectedBlocks) + double(s.selectedBlocks - s.skippedPvBlocks)) *
                              (r.blockFlops / 2) / sec / 1e12;
          const double eq = r.denseFlops / sec / 1e12;
          nlohmann::json js;
          js["topk"] = s.topk;
          js["stage2"] = statsJson(s.stage2);
          js["valid_blocks"] = s.validBlocks;
          js["selected_blocks"] = s.selectedBlocks;
          js["skipped_pv_blocks"] = s.skippedPvBlocks;
          js["density"] = s.density();
          js["sparsity"] = 1.0 - s.density();
          js["dense_equivalent_tops"] = eq;
          js["executed_tops"] = exec;
          js["stage2_over_dense"] = s.stage2.medianMs / r.dense.medianMs;
          jr["sparse"].push_back(js);
          t.row({std::to_string(n), std::to_string(d), bc.causal ? "yes" : "no", fmtNum(s.topk, 2),
                 fmtPct(s.density()), fmtNum(r.stage1.medianMs, 3),
                 fmtPct(r.stage1.medianMs / r.dense.medianMs), fmtNum(r.stage1Select.medianMs, 3),
                 fmtNum(s.stage2.medianMs, 3), fmtNum(r.dense.medianMs, 3),
                 fmtNum(s.stage2.medianMs / r.dense.medianMs, 3), fmtNum(eq, 1), fmtNum(exec, 1),
                 fmtNum(denseTops, 1)});
        }
        out["results"].push_back(jr);
        if (scope) scope->end();
      }
  t.print(std::cout);
  if (profiler) {
    const prof::TimingReport report = profiler->report();
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
    core::writeTextAtomically(o.json, out.dump(2) + "\n");
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
