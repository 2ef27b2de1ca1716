// Stage 1 of MInference and FlexPrefill on the CUDA engine (kernels/predictors/line_methods.h) timed alone on
// random data, with CUDA-event medians, to be read beside the dense walk of `sparge bench` at the same shape.
// usage: sparge_line_methods_bench [--tokens N] [--dim D] [--heads H] [--kv-heads H] [--reps R]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/cuda_util.h"
#include "engine/device_stages.h"
#include "predictors/line_methods.h"
#include "sparge/core/error.h"
#include "sparge/core/stage1.h"

namespace {

using namespace sparge;
using namespace sparge::cuda;

struct Options {
  int tokens = 32768, dim = 128, heads = 32, kvHeads = 0, reps = 10;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--tokens")
      o.tokens = v;
    else if (a == "--dim")
      o.dim = v;
    else if (a == "--heads")
      o.heads = v;
    else if (a == "--kv-heads")
      o.kvHeads = v;
    else if (a == "--reps")
      o.reps = v;
    else
      throw Error("line_methods_bench", "unknown option " + a);
  }
  if (o.kvHeads == 0) o.kvHeads = o.heads;
  return o;
}

// Median and minimum of `reps` timed calls (after one warm-up call) in milliseconds.
std::pair<float, float> timeCalls(const std::function<void()>& call, int reps) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  call();
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(a), "event");
    call();
    check(cudaEventRecord(b), "event");
    check(cudaEventSynchronize(b), "event");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "event");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

void run(const Options& o) {
  const int N = o.tokens, D = o.dim, Hq = o.heads, Hkv = o.kvHeads;
  DeviceBuffer q, k, heads, flags, sel, forced, score, dense, pairs, scratch;
  q.reserve(size_t(Hq) * N * D * 2, "q");
  k.reserve(size_t(Hkv) * N * D * 2, "k");
  launchRandomFill(ElemType::F16, q.get(), int64_t(Hq) * N * D, 1, 1.f, nullptr);
  launchRandomFill(ElemType::F16, k.get(), int64_t(Hkv) * N * D, 2, 1.f, nullptr);
  std::vector<int> headList(static_cast<size_t>(Hq));
  for (int h = 0; h < Hq; ++h) headList[size_t(h)] = h;
  uploadHeads(heads, headList);
  std::printf("line predictors, %d tokens, D %d, %d heads (%d KV), B 1, fp16, %s: median (min) of %d calls\n",
              N, D, Hq, Hkv, deviceNameOrThrow().c_str(), o.reps);
  for (const core::Geometry& g : {core::kGeometry64x128, core::kGeometry128x64})
    for (bool causal : {false, true}) {
      Problem p = makeProblem(1, Hq, Hkv, N, N, D, g, causal, {});
      p.heads = heads.as<int>();
      p.nHeads = Hq;
      const core::BlockValidity validity = core::computeBlockValidity(g, N, N, causal, {});
      const std::vector<uint8_t> f = blockFlags(validity, g, N, N, causal, {});
      flags.reserve(f.size(), "flags");
      check(cudaMemcpy(flags.get(), f.data(), f.size(), cudaMemcpyHostToDevice), "flags");
      const size_t blocks = size_t(Hq) * p.nq * p.nk;
      sel.reserve(blocks, "selected");
      forced.reserve(blocks, "forced");
      score.reserve(blocks * 4, "score");
      dense.reserve(size_t(Hq), "dense");
      pairs.reserve(size_t(Hq) * 8, "pairs");
      predictors::MethodRows rows{sel.as<uint8_t>(), forced.as<uint8_t>(), score.as<float>(),
                                  dense.as<uint8_t>(), pairs.as<double>()};
      std::vector<core::HeadParams> vs(static_cast<size_t>(Hq)), bs(static_cast<size_t>(Hq));
      for (auto& h : bs) h.minference.pattern = core::MInferencePattern::BlockSparse;
      predictors::MethodLaunch launch;
      launch.qkv = DeviceQkv{ElemType::F16, q.get(), k.get(), nullptr};
      launch.problem = p;
      launch.scale = 1.0 / std::sqrt(double(D));
      launch.blockFlags = flags.as<uint8_t>();
      const struct {
        const char* name;
        const std::vector<core::HeadParams>* params;
        void (*fn)(const predictors::MethodLaunch&, predictors::MethodRows&, DeviceBuffer&);
      } methods[] = {{"minference vertical_slash", &vs, predictors::predictMInference},
                     {"minference block_sparse", &bs, predictors::predictMInference},
                     {"flexprefill", &vs, predictors::predictFlexPrefill}};
      for (const auto& m : methods) {
        launch.params = m.params;
        const auto [median, best] = timeCalls([&] { m.fn(launch, rows, scratch); }, o.reps);
        std::printf("  %dx%d %-13s %-26s %8.3f ms (%.3f)\n", g.blockQ, g.blockK,
                    causal ? "causal" : "non-causal", m.name, median, best);
      }
    }
  check(cudaDeviceSynchronize(), "line predictors");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
