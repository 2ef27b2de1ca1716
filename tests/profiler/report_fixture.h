// A synthetic report input shared by the report and export tests: 1 warm-up + 3 profiled runs on "GPU 0".
#pragma once

#include "sparge/profiler/report.h"

namespace sparge::prof::fixtures {

inline KernelSample makeKernel(const std::string& name, Stage stage, uint64_t run, uint64_t startNs,
                               uint64_t durNs, uint32_t stream = 7) {
  KernelSample k;
  k.name = name;
  k.rawName = name;
  k.stage = stage;
  k.runId = run;
  k.attribution = Attribution::ExternalId;
  k.startNs = startNs;
  k.endNs = startNs + durNs;
  k.streamId = stream;
  k.source = TimingSource::Cupti;
  return k;
}

// Run r (1..4; 1 is warm-up) starts at r*1e6 ns. Per profiled run: predict 0.1 ms, sparse 0.4 ms (two
// launches of 0.2 ms in run 2..3, one of 0.4 in run 4: the per-run sum is what counts), dense 0.9/1.0/1.1 ms.
inline ReportInput syntheticInput() {
  ReportInput in;
  in.source = TimingSource::Cupti;
  in.sourceReason = "synthetic";
  in.device.gpu = true;
  in.device.index = 0;
  in.device.name = "Test GPU, rev \"A\"";
  in.device.maxSmClockKHz = 1980000;
  in.device.clockNote = "max SM clock";
  for (uint64_t r = 1; r <= 4; ++r) {
    RunRecord run;
    run.id = r;
    run.index = int(r - 1);
    run.warmup = r == 1;
    run.info.entry = "l0";
    run.info.heads = "all";
    run.info.params = "theta=0.6 tau=0.98 lambda=50 128x64";
    run.clock = TimingSource::Cupti;
    run.startNs = r * 1000000;
    run.endNs = run.startNs + 800000;
    run.samples.push_back({Stage::Total, 2.0 + double(r), TimingSource::WallClock});
    in.runs.push_back(run);
  }
  const std::string predict = "sparge_predict_pool(float const*, int)";
  const std::string sparse = "sparge_sparse_attn<128>(float const*, float*)";
  const std::string dense = "sparge_dense_fwd";
  const double denseMs[] = {0, 5.0, 0.9, 1.0, 1.1};
  for (uint64_t r = 1; r <= 4; ++r) {
    uint64_t t = r * 1000000 + 1000;
    in.kernels.push_back(makeKernel(predict, Stage::Predict, r, t, 100000));
    if (r == 4) {
      in.kernels.push_back(makeKernel(sparse, Stage::Sparse, r, t + 100000, 400000));
    } else {
      in.kernels.push_back(makeKernel(sparse, Stage::Sparse, r, t + 100000, 200000));
      in.kernels.push_back(makeKernel(sparse, Stage::Sparse, r, t + 300000, 200000));
    }
    in.kernels.push_back(makeKernel(dense, Stage::Dense, r, t + 500000, uint64_t(denseMs[r] * 1e6), 8));
  }
  // Launched outside every run.
  KernelSample stray = makeKernel("ampere_sgemm", Stage::Other, 0, 500, 1000);
  stray.attribution = Attribution::None;
  in.kernels.push_back(stray);

  in.workload.batch = 1;
  in.workload.heads = 2;
  in.workload.tokensQ = 1024;
  in.workload.tokensKV = 1024;
  in.workload.headDim = 64;
  in.workload.headDimV = 64;
  in.workload.blockQ = 128;
  in.workload.blockK = 64;
  in.workload.computedQkBlocks = 100;
  in.workload.computedPvBlocks = 80;
  return in;
}

}  // namespace sparge::prof::fixtures
