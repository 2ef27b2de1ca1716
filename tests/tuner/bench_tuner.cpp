// Benchmark (not a test): tunes one synthetic entry and prints the time. Defaults are the CPU
// target (12 heads x 2048 tokens x D = 64 on the CPU engine); the GPU target is
//   sparge_tuner_bench --engine cuda --heads 32 --tokens 16384 --dim 128
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sparge/core/error.h"
#include "sparge/core/synthetic.h"
#include "sparge/core/tuner.h"
#include "sparge/kernels/engine_factory.h"

using namespace sparge;

int main(int argc, char** argv) {
  core::SynthSpec spec;
  spec.name = "bench";
  spec.headsQ = spec.headsKV = 12;
  spec.tokensQ = spec.tokensKV = 2048;
  spec.headDim = spec.headDimV = 64;
  std::string engineName = "cpu";
  core::TuneOptions opt;
  opt.l1 = 0.05;
  opt.l2 = 0.06;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    const char* a = argv[i];
    if (!std::strcmp(a, "--heads")) spec.headsQ = spec.headsKV = std::atoll(next(a));
    else if (!std::strcmp(a, "--tokens")) spec.tokensQ = spec.tokensKV = std::atoll(next(a));
    else if (!std::strcmp(a, "--dim")) spec.headDim = spec.headDimV = std::atoll(next(a));
    else if (!std::strcmp(a, "--engine")) engineName = next(a);
    else if (!std::strcmp(a, "--threads")) threads = std::atoi(next(a));
    else if (!std::strcmp(a, "--l1")) opt.l1 = std::atof(next(a));
    else if (!std::strcmp(a, "--l2")) opt.l2 = std::atof(next(a));
    else if (!std::strcmp(a, "--topk-mode")) opt.mode = core::SelectMode::TopK;
    else if (!std::strcmp(a, "--block")) opt.geometry = core::Geometry::parse(next(a));
    else if (!std::strcmp(a, "--causal")) spec.causal = true;
    else {
      std::fprintf(stderr,
                   "usage: sparge_tuner_bench [--heads H] [--tokens N] [--dim D] [--engine cpu|cuda|auto] "
                   "[--threads T] [--l1 X] [--l2 Y] [--topk-mode] [--block 128x64|64x128] [--causal]\n");
      return 2;
    }
  }
  try {
    auto sel = engines::makeEngine(core::parseEngineChoice(engineName), threads);
    if (!sel.message.empty()) std::fprintf(stderr, "note: %s\n", sel.message.c_str());
    const auto t0 = std::chrono::steady_clock::now();
    auto entry = std::make_shared<const core::EntryData>(core::makeSyntheticEntry(spec));
    const double genS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("entry: %lld heads x %lld tokens x D=%lld%s, geometry %s, engine %s (generated in %.2f s)\n",
                (long long)spec.headsQ, (long long)spec.tokensQ, (long long)spec.headDim,
                spec.causal ? " causal" : "", opt.geometry.label().c_str(), sel.engine->name().c_str(), genS);
    const core::TuneResult r = core::tuneEntry(*sel.engine, entry, opt);
    const core::TunedGroup& g = r.groups.at(0);
    int sparse = 0, probes = 0;
    double s1 = 0, tot = 0, maxL1 = 0;
    for (const auto& h : g.heads) {
      sparse += h.isSparse ? 1 : 0;
      probes += h.probes;
      s1 += h.stage1Sparsity;
      tot += h.totalSparsity;
      maxL1 = std::max(maxL1, h.l1);
    }
    const double n = double(g.heads.size());
    std::printf(
        "tuned %zu heads (%d sparse) in %.2f s: %lld engine runs (%.1f ms each), %d head probes; "
        "mean stage-1 sparsity %.3f, mean total %.3f, max L1 %.4f (l1 %.3f, l2 %.3f)\n",
        g.heads.size(), sparse, g.elapsedSeconds, (long long)r.probes,
        r.probes ? 1000.0 * g.elapsedSeconds / double(r.probes) : 0.0, probes, s1 / n, tot / n, maxL1, opt.l1,
        opt.l2);
    std::printf("elapsed per entry: %.2f s\n", g.elapsedSeconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
