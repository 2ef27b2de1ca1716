// Kernel-level benchmark of Stage 2: the attention families (Hopper and mma.sync) in every numerics, dense
// and at given block densities (random LUTs), and the operand quantization. Prints one row per configuration
// with CUDA-event medians and dense-equivalent TFLOPS (4·B·H·N²·D / t, halved when causal). usage:
// sparge_attention_bench [--tokens 8192,16384] [--dims 64,128] [--causal 0,1] [--numerics none,int8-fp8]
//        [--geometry 64x128,128x64] [--family default,sm80] [--density 1,0.5,0.2] [--rows random|shared]
//        [--heads 32] [--repeat 10]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "common/launch.h"
#include "sparge/core/types.h"

namespace {

using namespace sparge;
using namespace sparge::cuda;
using sparge::bench::ok;
using sparge::bench::splitList;

__global__ void fillNormal(uint16_t* x, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 29;
    const float u1 = ((h & 0xFFFFFF) + 1) * (1.f / 16777217.f),
                u2 = ((h >> 24) & 0xFFFFFF) * (1.f / 16777216.f);
    const float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    x[i] = __half_as_ushort(__float2half_rn(z));
  }
}

struct Options {
  std::vector<int> tokens{16384}, dims{128}, causal{0};
  std::vector<std::string> numerics{"none", "int8-fp8"}, geometry{"64x128"}, family{"default", "sm80"};
  std::vector<float> density{1.f, 0.5f, 0.2f, 0.1f};
  bool sharedRows = false;  // --rows shared: the tiles of a head visit the same blocks
  int heads = 32, repeat = 10;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::vector<std::string> v = splitList(argv[i + 1]);
    auto ints = [&](std::vector<int>& dst) {
      dst.clear();
      for (auto& x : v) dst.push_back(std::stoi(x));
    };
    if (k == "--tokens")
      ints(o.tokens);
    else if (k == "--dims")
      ints(o.dims);
    else if (k == "--causal")
      ints(o.causal);
    else if (k == "--numerics")
      o.numerics = v;
    else if (k == "--geometry")
      o.geometry = v;
    else if (k == "--family")
      o.family = v;
    else if (k == "--density") {
      o.density.clear();
      for (auto& x : v) o.density.push_back(std::stof(x));
    } else if (k == "--rows") {
      if (v.empty() || (v[0] != "random" && v[0] != "shared")) {
        std::fprintf(stderr, "--rows: random or shared\n");
        std::exit(2);
      }
      o.sharedRows = v[0] == "shared";
    } else if (k == "--heads")
      o.heads = std::stoi(v[0]);
    else if (k == "--repeat")
      o.repeat = std::stoi(v[0]);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return o;
}

template <typename F>
float medianMs(F f, int repeat) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  f();  // warm-up
  ok(cudaDeviceSynchronize(), "warm-up");
  std::vector<float> t;
  for (int r = 0; r < repeat; ++r) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms);
  }
  ok(cudaGetLastError(), "launch");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A LUT in which every query tile visits round(density · visible blocks) random visible blocks (at least
// one): drawn for each tile (`shared` false) or, for every tile of a head, the first visible blocks of one
// random order of the head's blocks (`shared`: the tiles of a head agree, as top-k masks do when a few key
// blocks score high for every query). Returns the share of visible blocks selected.
double randomLut(const Problem& p, float density, bool shared, std::vector<int32_t>& lut,
                 std::vector<int32_t>& count) {
  std::mt19937 rng(7);
  lut.assign(size_t(p.nHeads) * p.nq * p.nk, 0);
  count.assign(size_t(p.nHeads) * p.nq, 0);
  double sel = 0, vis = 0;
  std::vector<int> order(p.nk);
  for (int h = 0; h < p.nHeads; ++h) {
    for (int j = 0; j < p.nk; ++j) order[j] = j;
    std::shuffle(order.begin(), order.end(), rng);
    for (int i = 0; i < p.nq; ++i) {
      const int lastQ = std::min(p.Nq, (i + 1) * p.BQ) - 1;
      const int nVis = p.causal ? std::min(p.nk, lastQ / p.BK + 1) : p.nk;
      std::vector<int> blocks;
      if (shared) {
        for (int j : order)
          if (j < nVis) blocks.push_back(j);
      } else {
        blocks.resize(nVis);
        for (int j = 0; j < nVis; ++j) blocks[j] = j;
        std::shuffle(blocks.begin(), blocks.end(), rng);
      }
      const int n = std::max(1, int(density * nVis + 0.5f));
      blocks.resize(n);
      std::sort(blocks.begin(), blocks.end());
      for (int t = 0; t < n; ++t)
        lut[(size_t(h) * p.nq + i) * p.nk + t] = t ? blocks[t] - blocks[t - 1] : blocks[0];
      count[size_t(h) * p.nq + i] = n;
      sel += n, vis += nVis;
    }
  }
  return sel / vis;
}

struct Device {
  uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *km = nullptr;
  void* ws = nullptr;
  size_t wsBytes = 0;
};

void runConfig(const Options& o, Device& dv, int N, int D, bool causal, const std::string& num,
               const std::string& geo, const std::string& fam) {
  core::Geometry g;
  std::sscanf(geo.c_str(), "%dx%d", &g.blockQ, &g.blockK);
  Problem p;
  p.B = 1, p.Hq = p.Hkv = o.heads, p.Nq = p.Nkv = N, p.D = D, p.BQ = g.blockQ, p.BK = g.blockK;
  p.nq = (N + g.blockQ - 1) / g.blockQ, p.nk = (N + g.blockK - 1) / g.blockK, p.causal = causal;
  p.nHeads = o.heads;
  const core::Numerics n = num == "int8-fp8"    ? core::Numerics::Int8Fp8
                           : num == "int8-fp16" ? core::Numerics::Int8Fp16
                                                : core::Numerics::None;
  std::vector<int> heads(o.heads);
  for (int h = 0; h < o.heads; ++h) heads[h] = h;
  int* dHeads;
  int32_t *dLut, *dCount;
  HeadParamsDev* dParams;
  uint8_t* dSkip;
  int* dEmpty;
  ok(cudaMalloc(&dHeads, o.heads * 4), "malloc");
  ok(cudaMalloc(&dLut, size_t(o.heads) * p.nq * p.nk * 4), "malloc");
  ok(cudaMalloc(&dCount, size_t(o.heads) * p.nq * 4), "malloc");
  ok(cudaMalloc(&dParams, o.heads * sizeof(HeadParamsDev)), "malloc");
  ok(cudaMalloc(&dSkip, size_t(o.heads) * p.nq * p.nk), "malloc");
  ok(cudaMalloc(&dEmpty, o.heads * 4), "malloc");
  cudaMemcpy(dHeads, heads.data(), o.heads * 4, cudaMemcpyHostToDevice);
  std::vector<HeadParamsDev> hp(o.heads);  // λ = 50 (SpargeAttn's default): the vote runs, skips are rare
  for (auto& x : hp) x.lambda = 50.f;
  cudaMemcpy(dParams, hp.data(), hp.size() * sizeof(HeadParamsDev), cudaMemcpyHostToDevice);
  p.heads = dHeads;
  AttnArgs a;
  a.q = dv.q, a.k = dv.k, a.v = dv.v, a.o = dv.o;
  a.scaleLog2 = float(1.0 / std::sqrt(double(D)) * 1.4426950408889634);
  a.lut = dLut, a.validCount = dCount, a.params = dParams, a.pvSkipped = dSkip, a.emptyRows = dEmpty;
  a.numerics = n;
  const KernelSwitches switches = KernelSwitches::fromEnvironment();
  a.sm90SplitBelow = switches.sm90SplitBelow;
  a.family = fam == "sm80" ? AttnFamily::Sm80 : AttnFamily::Auto;
  const size_t need = quantWorkspaceBytes(p, n);
  if (need > dv.wsBytes) {
    cudaFree(dv.ws);
    ok(cudaMalloc(&dv.ws, need), "malloc workspace");
    dv.wsBytes = need;
  }
  float quantMs = 0;
  if (n != core::Numerics::None) {
    quantMs = medianMs(
        [&] { a.quant = launchQuantize(ElemType::F16, p, n, dv.q, dv.k, dv.km, dv.v, dv.ws, 0); }, o.repeat);
  }
  const double flops = 4.0 * o.heads * double(N) * N * D * (causal ? 0.5 : 1.0);
  const char* kernel = attentionSm90Selected(p, n, a.family) ? "sm90" : "sm80";
  for (float dens : o.density) {
    std::vector<int32_t> lut, count;
    const double share = randomLut(p, dens, o.sharedRows, lut, count);
    cudaMemcpy(dLut, lut.data(), lut.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dCount, count.data(), count.size() * 4, cudaMemcpyHostToDevice);
    const bool dense = dens >= 1.f;
    const float ms = medianMs([&] { launchAttention(ElemType::F16, p, a, dense, 0); }, o.repeat);
    std::printf("| %5d | %3d | %d | %-9s | %s | %s | %-7s | %5.3f | %8.3f | %7.3f | %6.0f | %6.0f |\n", N, D,
                causal ? 1 : 0, num.c_str(), geo.c_str(), kernel, dense ? "dense" : "sparse", share, ms,
                quantMs, flops / (ms * 1e9), flops / ((ms + quantMs) * 1e9));
    std::fflush(stdout);
  }
  for (void* x : {(void*)dHeads, (void*)dLut, (void*)dCount, (void*)dParams, (void*)dSkip, (void*)dEmpty})
    cudaFree(x);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  cudaDeviceProp prop;
  ok(cudaGetDeviceProperties(&prop, 0), "device");
  std::printf("device: %s, %d SMs; heads %d, B 1, fp16 inputs, lambda 50, LUT rows %s, repeat %d (median)\n",
              prop.name, prop.multiProcessorCount, o.heads,
              o.sharedRows ? "shared by a head's tiles" : "random", o.repeat);
  std::printf(
      "| N | D | causal | numerics | geometry | kernel | launch | density | attn ms | quant ms | "
      "attn TFLOPS | +quant TFLOPS |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
      "--- |\n");
  const int maxN = *std::max_element(o.tokens.begin(), o.tokens.end());
  const int maxD = *std::max_element(o.dims.begin(), o.dims.end());
  const size_t elems = size_t(o.heads) * maxN * maxD;
  Device dv;
  for (uint16_t** x : {&dv.q, &dv.k, &dv.v, &dv.o}) ok(cudaMalloc(x, elems * 2), "malloc");
  ok(cudaMalloc(&dv.km, size_t(o.heads) * maxD * 2), "malloc");
  cudaMemset(dv.km, 0, size_t(o.heads) * maxD * 2);
  fillNormal<<<1024, 256>>>(dv.q, elems, 1);
  fillNormal<<<1024, 256>>>(dv.k, elems, 2);
  fillNormal<<<1024, 256>>>(dv.v, elems, 3);
  ok(cudaDeviceSynchronize(), "fill");
  for (int N : o.tokens)
    for (int D : o.dims)
      for (int c : o.causal)
        for (const auto& num : o.numerics)
          for (const auto& geo : o.geometry)
            for (const auto& fam : o.family) runConfig(o, dv, N, D, c != 0, num, geo, fam);
  return 0;
}
