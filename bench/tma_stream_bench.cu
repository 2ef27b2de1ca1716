// How fast the SMs take K/V blocks in through TMA when nothing else runs: the yardstick for the Hopper sparse
// walks, whose time on random masks came out 13-31 % above their K/V bytes per SM divided by this rate. With
// every SM loading, the rate is the L2's in all (H100: 7.6-8.1 TB/s, 57-61 GB/s an SM); an SM takes more when
// fewer load (84-88 GB/s with a half or a quarter of them: `--heads 1 --share 1 --tokens 12672`; "GB/s an
// active SM" divides by the SMs that hold a CTA). Each CTA of the Hopper kernel's grid (one CTA an SM at a
// time, 32 heads, ceil(N/64/3) CTAs a head) loads `share` of its head's 128-key blocks, at random, K and V of
// a block as fp16 [128][D] tiles with the kernel's boxes and swizzle, into a ring of shared-memory slots; one
// warp waits for each slot and frees it at once. Prints one row per slot layout with CUDA-event medians. usage:
// sparge_tma_stream_bench [--tokens 16384,32768] [--dims 128,64] [--share 0.488] [--heads 32] [--repeat 7]
// (share 0.488: the union of three tiles' rows at 20 % random density, 1 - 0.8^3.)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.h"
#include "attention/sm90/hopper_sync.cuh"
#include "sparge/core/error.h"
#include "attention/sm90/tma_map.h"

namespace {

using sparge::bench::ok;
using sparge::bench::splitList;

constexpr int kKeys = 128;     // keys a block
constexpr int kThreads = 256;  // a producer thread, a waiting warp, idle warps (the kernel's CTA has 512)
constexpr int kBoxCols = 64;   // fp16 columns of a 128-byte box row
constexpr int kMaxSmem = 227 * 1024;

struct StreamParams {
  CUtensorMap kv;    // [heads * 2][N][D] fp16: K of head h at 2h, V at 2h + 1
  int d, blocks;     // head dim, key blocks of a head
  int steps;         // blocks a CTA loads
  int tilesPerSlot;  // 2: K and V of a block in one slot; 1: K and V in consecutive slots
};

template <int kSlots>
__global__ void __launch_bounds__(kThreads, 1) sparge_tma_stream(const __grid_constant__ StreamParams p) {
#ifdef SPARGE_SM90A_DEVICE
  using namespace sparge::cuda::sm90;
  extern __shared__ unsigned char smemRaw[];
  const uint32_t base = ((uint32_t)__cvta_generic_to_shared(smemRaw) + 1023u) & ~1023u;
  const int tileBytes = kKeys * p.d * 2, slotBytes = tileBytes * p.tilesPerSlot;
  const uint32_t full = base + kSlots * slotBytes, empty = full + 8 * kSlots;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) {
      mbarInit(full + 8 * s, 1);
      mbarInit(empty + 8 * s, 1);
    }
    fenceBarrierInit();
  }
  __syncthreads();
  const int tiles = p.steps * 2 / p.tilesPerSlot;  // slot fills of the CTA
  if (threadIdx.x == 0) {
    prefetchTensorMap(&p.kv);
    uint32_t h = (blockIdx.x + 1) * 2654435761u ^ (blockIdx.y + 1) * 40503u;
    int j = 0;
    for (int t = 0, s = 0, phase = 0; t < tiles; ++t) {
      mbarWait(empty + 8 * s, phase ^ 1);
      mbarArriveExpectTx(full + 8 * s, slotBytes);
      for (int x = 0; x < p.tilesPerSlot; ++x) {
        const int tile = t * p.tilesPerSlot + x;  // even: K of a new block, odd: its V
        if (tile % 2 == 0) {
          h = h * 1664525u + 1013904223u;
          j = (int)((h >> 8) % (uint32_t)p.blocks);
        }
        for (int c = 0; c < p.d / kBoxCols; ++c)
          tmaLoad3d(base + s * slotBytes + x * tileBytes + c * kKeys * 128, &p.kv, full + 8 * s, c * kBoxCols,
                    j * kKeys, 2 * blockIdx.y + tile % 2);
      }
      if (++s == kSlots) s = 0, phase ^= 1;
    }
  } else if (threadIdx.x / 32 == 1) {
    for (int t = 0, s = 0, phase = 0; t < tiles; ++t) {
      mbarWait(full + 8 * s, phase);
      __syncwarp();
      if (threadIdx.x % 32 == 0) mbarArrive(empty + 8 * s);
      if (++s == kSlots) s = 0, phase ^= 1;
    }
  }
#else
  __trap();  // only the sm_90a image is launched
#endif
}

struct Options {
  std::vector<int> tokens{16384, 32768}, dims{128, 64};
  double share = 0.488;
  int heads = 32, repeat = 7;
};

Options parse(int argc, char** argv) {
  Options o;
  if (argc % 2 == 0) {
    std::fprintf(stderr,
                 "%s: an option without its value (see the usage at the top of bench/tma_stream_bench.cu)\n",
                 argv[argc - 1]);
    std::exit(2);
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::vector<std::string> v = splitList(argv[i + 1]);
    if (k == "--tokens" || k == "--dims") {
      std::vector<int>& dst = k == "--tokens" ? o.tokens : o.dims;
      dst.clear();
      for (auto& x : v) dst.push_back(std::atoi(x.c_str()));
    } else if (k == "--share") {
      o.share = std::atof(argv[i + 1]);
    } else if (k == "--heads") {
      o.heads = std::atoi(argv[i + 1]);
    } else if (k == "--repeat") {
      o.repeat = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown option %s (see the usage at the top of bench/tma_stream_bench.cu)\n",
                   k.c_str());
      std::exit(2);
    }
  }
  for (int d : o.dims)
    if (d != 64 && d != 128) {
      std::fprintf(stderr, "--dims: 64 or 128, not %d\n", d);
      std::exit(2);
    }
  for (int n : o.tokens)
    if (n < 128 || n > (1 << 20)) {
      std::fprintf(stderr, "--tokens: 128 to 1048576, not %d\n", n);
      std::exit(2);
    }
  if (!(o.share > 0 && o.share <= 1) || o.heads < 1 || o.heads > 1024 || o.repeat < 1) {
    std::fprintf(stderr, "--share must be in (0, 1], --heads 1 to 1024, --repeat at least 1\n");
    std::exit(2);
  }
  return o;
}

using Kernel = void (*)(StreamParams);
Kernel kernelFor(int slots) {
  switch (slots) {
    case 2:
      return sparge_tma_stream<2>;
    case 3:
      return sparge_tma_stream<3>;
    case 4:
      return sparge_tma_stream<4>;
    default:
      return sparge_tma_stream<6>;
  }
}

// Median time of one launch of the stream over the Hopper kernel's grid.
float medianMs(Kernel k, const StreamParams& p, dim3 grid, int smem, int repeat) {
  ok(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "cudaFuncSetAttribute");
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a), "event");
  ok(cudaEventCreate(&b), "event");
  k<<<grid, kThreads, smem>>>(p);  // warm-up
  std::vector<float> ms;
  for (int r = 0; r < repeat; ++r) {
    cudaEventRecord(a);
    k<<<grid, kThreads, smem>>>(p);
    cudaEventRecord(b);
    ok(cudaEventSynchronize(b), "sparge_tma_stream");
    float x = 0;
    cudaEventElapsedTime(&x, a, b);
    ms.push_back(x);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void runShape(const Options& o, int n, int d, int sms) {
  const size_t bytes = (size_t)o.heads * 2 * n * d * 2;
  void* kv = nullptr;
  ok(cudaMalloc(&kv, bytes), "cudaMalloc");
  ok(cudaMemset(kv, 0x3c, bytes), "cudaMemset");
  StreamParams p{};
  p.kv = sparge::cuda::tensorMap3d(kv, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, d, n, 2ull * o.heads, kBoxCols,
                                   kKeys);
  p.d = d;
  p.blocks = (n + kKeys - 1) / kKeys;
  p.steps = std::max(1, (int)std::lround(o.share * p.blocks));
  const dim3 grid(((n + 63) / 64 + 2) / 3, o.heads);
  const int tileBytes = kKeys * d * 2;
  for (int tilesPerSlot : {2, 1})
    for (int slots : {2, 3, 4, 6}) {
      const int smem = slots * tileBytes * tilesPerSlot + 16 * slots + 1024;
      if (smem > kMaxSmem) continue;
      p.tilesPerSlot = tilesPerSlot;
      const float ms = medianMs(kernelFor(slots), p, grid, smem, o.repeat);
      const double moved = (double)grid.x * grid.y * p.steps * 2.0 * tileBytes;
      const int active = std::min<int>(sms, (int)(grid.x * grid.y));  // one CTA an SM at a time
      std::printf("| %5d | %3d | %3d KB (%s) | %d | %d | %7.3f | %5.2f | %5.1f | %5.1f |\n", n, d,
                  tileBytes * tilesPerSlot / 1024, tilesPerSlot == 2 ? "K+V" : "K or V", slots, p.steps, ms,
                  moved / (ms * 1e9), moved / (ms * 1e6) / sms, moved / (ms * 1e6) / active);
      std::fflush(stdout);
    }
  cudaFree(kv);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  cudaDeviceProp prop;
  ok(cudaGetDeviceProperties(&prop, 0), "device");
  if (prop.major != 9 || prop.minor != 0) {
    std::fprintf(stderr, "%s is compute capability %d.%d; this benchmark needs an sm_90 GPU (H100, H200)\n",
                 prop.name, prop.major, prop.minor);
    return 2;
  }
  int clockKHz = 0;
  cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, 0);
  std::printf("device: %s, %d SMs, max SM clock %d MHz; %d heads, K/V share a CTA %.3f, repeat %d (median)\n",
              prop.name, prop.multiProcessorCount, clockKHz / 1000, o.heads, o.share, o.repeat);
  std::printf(
      "| N | D | slot | slots | blocks a CTA | ms | TB/s | GB/s an SM | GB/s an active SM |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  try {
    for (int n : o.tokens)
      for (int d : o.dims) runShape(o, n, d, prop.multiProcessorCount);
  } catch (const sparge::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
