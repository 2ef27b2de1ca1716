// The last queries' softmax summed per key column and per diagonal (line_common.h's launchLineSums) without
// the score matrix in memory: a first pass scores the keys on the tensor cores and keeps per-row partial
// maxima and exponential sums, a second scores them again and adds the probabilities straight into the
// column and diagonal sums. Every score is the same mma chain as the first version's stored one, and every
// column and diagonal adds its probabilities in row order (the CPU's order).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "common/cuda_util.h"
#include "common/device_common.cuh"
#include "common/head_dim.h"
#include "common/mma_sm80.cuh"
#include "predictors/line_common.h"
#include "predictors/line_device.cuh"

namespace sparge::cuda::predictors::lines {
namespace {

// The input-type score of an accumulator, as the CPU rounds it: T(T(q · k) · postScale).
template <typename T>
__device__ __forceinline__ float scoreOf(float acc, float postScale) {
  return roundT<T>(roundT<T>(acc) * postScale);
}

// Running (max, Σ exp(x − max)) of a row: merges another pair into (m, l).
__device__ __forceinline__ void mergeStats(float& m, float& l, float om, float ol) {
  const float mn = fmaxf(m, om);
  if (mn == -INFINITY) return;
  l = (m == -INFINITY ? 0.f : l * expf(m - mn)) + (om == -INFINITY ? 0.f : ol * expf(om - mn));
  m = mn;
}

// One CTA per kPartialKeys keys of a slot; warp w scores query rows 16w .. 16w+15 (A fragments in registers)
// against the keys 8 at a time, kGroup steps before folding them into each row's running max and sum.
// Output: partial[slot][row][chunk] = (max, Σ exp(s − max)) over the chunk's keys the row's query sees.
constexpr int kPartialKeys = 128, kGroup = 4;
template <typename T, int D>
__global__ void __launch_bounds__(256)
    sparge_predict_line_row_partials(const T* __restrict__ lastQ, const T* __restrict__ k, Problem p, int L,
                                     int Lpad, float postScale, int chunks, float2* __restrict__ partial) {
  constexpr int kSteps = D / 16;
  const SlotHeads h = slotHeads(p, blockIdx.y);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int r0 = warp * 16;
  const T* qRows = lastQ + (size_t)blockIdx.y * Lpad * D;
  const T* kRows = k + (size_t)h.bhk * p.Nkv * D;
  uint32_t a[kSteps][4];
  {
    uint32_t lo[D / 8], hi[D / 8];
    sliceOf<T, D>(qRows, r0 + g, t, Lpad, lo);
    sliceOf<T, D>(qRows, r0 + g + 8, t, Lpad, hi);
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      a[s][0] = lo[2 * s];
      a[s][1] = hi[2 * s];
      a[s][2] = lo[2 * s + 1];
      a[s][3] = hi[2 * s + 1];
    }
  }
  const Visible vis[2] = {visibleOf(p.Nq - L + r0 + g, p), visibleOf(p.Nq - L + r0 + g + 8, p)};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int kBegin = blockIdx.x * kPartialKeys, kEnd = min(p.Nkv, kBegin + kPartialKeys);
#pragma unroll 1
  for (int j0 = kBegin; j0 < kEnd; j0 += 8 * kGroup) {
    float v[kGroup][4];
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      uint32_t b[D / 8];
      sliceOf<T, D>(kRows, j0 + 8 * u + g, t, p.Nkv, b);
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int s = 0; s < kSteps; ++s) sm80::Mma<T>::run(c, a[s], b[2 * s], b[2 * s + 1]);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const long long col = j0 + 8 * u + 2 * t + (e & 1);
        const Visible& r = vis[e >> 1];
        v[u][e] = col >= r.first && col <= r.last ? scoreOf<T>(c[e], postScale) : -INFINITY;
      }
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float gm = -INFINITY;
#pragma unroll
      for (int u = 0; u < kGroup; ++u) gm = fmaxf(gm, fmaxf(v[u][2 * hh], v[u][2 * hh + 1]));
      const float mn = fmaxf(m[hh], gm);
      if (mn == -INFINITY) continue;
      float acc = m[hh] == -INFINITY ? 0.f : l[hh] * expf(m[hh] - mn);
#pragma unroll
      for (int u = 0; u < kGroup; ++u) acc += expf(v[u][2 * hh] - mn) + expf(v[u][2 * hh + 1] - mn);
      l[hh] = acc;
      m[hh] = mn;
    }
  }
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    for (int off = 1; off <= 2; off <<= 1) {
      const float om = __shfl_xor_sync(0xffffffffu, m[hh], off), ol = __shfl_xor_sync(0xffffffffu, l[hh], off);
      mergeStats(m[hh], l[hh], om, ol);
    }
    const int row = r0 + g + 8 * hh;
    if (t == 0 && row < L) partial[((size_t)blockIdx.y * L + row) * chunks + blockIdx.x] = make_float2(m[hh], l[hh]);
  }
}

// Warp per row: the row's max over its chunks and Σ l · exp(m − max), in a fixed order (deterministic).
__global__ void sparge_predict_line_row_combine(const float2* __restrict__ partial, int rows, int chunks,
                                                float* __restrict__ rowMax, float* __restrict__ rowSum) {
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float2* in = partial + (size_t)row * chunks;
  float mx = -INFINITY;
  for (int c = lane; c < chunks; c += 32) mx = fmaxf(mx, in[c].x);
  for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  if (mx != -INFINITY)
    for (int c = lane; c < chunks; c += 32)
      if (in[c].x != -INFINITY) sum += in[c].y * expf(in[c].x - mx);
  for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) {
    rowMax[row] = mx;
    rowSum[row] = sum;
  }
}

// CTA per (window of kSumWindow columns c0 .. c0 + W − 1, slot), as the stored-score version: thread t sums
// column c0 + t and the diagonal that meets row L − 1 at column c0 + t (o = Nq − 1 − c0 − t), which at row r
// lies L − 1 − r columns further left, so `rows` rows at a time need the probabilities of columns
// [c0 − lead, c0 + W) alone (lead: L − 1 rounded up to 8). Warps score 8 of those columns at a time against
// the chunk's rows (the queries' A fragments staged in shared memory once, each key's B fragment loaded
// once a chunk, the next one while the current is scored), write exp(s − max) / sum (0 where the query does
// not see the key: +0 leaves a sum as it is) to shared memory, and each thread then adds its column's and its
// diagonal's row by row.
constexpr int kSumWindow = 512, kSumWarps = kSumWindow / 32, kSumMaxRows = 64;
template <typename T, int D>
__global__ void __launch_bounds__(kSumWindow, 1)
    sparge_predict_line_fused_sums(const T* __restrict__ lastQ, const T* __restrict__ k, Problem p, int L,
                                   int Lpad, int rows, int lead, long long cBase, float postScale,
                                   const float* __restrict__ rowMax, const float* __restrict__ rowSum,
                                   LineSums out) {
  constexpr int kSteps = D / 16;
  extern __shared__ uint4 smem[];
  uint4* qs = smem;  // [Lpad / 16][kSteps][32 lanes]: the A fragments
  const int stride = lead + kSumWindow + 8;  // +8: a fragment's eight rows fall on distinct banks
  float* prob = reinterpret_cast<float*>(qs + Lpad / 16 * kSteps * 32);  // [rows][stride]
  __shared__ long long rowFirst[kSumMaxRows], rowLast[kSumMaxRows];
  __shared__ float mx[kSumMaxRows], sum[kSumMaxRows];
  const int s = blockIdx.y, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int nTiles = (lead + kSumWindow) / 8;
  const long long c0 = cBase + (long long)blockIdx.x * kSumWindow, left = c0 - lead;
  const T* kRows = k + (size_t)slotHeads(p, s).bhk * p.Nkv * D;
  const uint32_t* qWords = reinterpret_cast<const uint32_t*>(lastQ + (size_t)s * Lpad * D);
  for (int x = tid; x < Lpad / 16 * kSteps * 32; x += blockDim.x) {
    const int mt = x / (kSteps * 32), st = (x / 32) % kSteps, gg = (x % 32) >> 2, tt = x % 4;
    const size_t w0 = (size_t)(mt * 16 + gg) * (D / 2) + tt * (D / 8) + 2 * st, w1 = w0 + 8 * (D / 2);
    qs[x] = make_uint4(qWords[w0], qWords[w1], qWords[w0 + 1], qWords[w1 + 1]);
  }
  float accV = 0.f, accD = 0.f;
  for (int r0 = 0; r0 < L; r0 += rows) {
    const int nRows = min(rows, L - r0), mTiles = (nRows + 15) / 16;
    const int firstIdx = lead - (L - 1) + r0;  // the leftmost column a diagonal needs in this chunk
    if (tid < nRows) {
      const Visible v = visibleOf(p.Nq - L + r0 + tid, p);
      rowFirst[tid] = v.first;
      rowLast[tid] = v.last;
      mx[tid] = rowMax[(size_t)s * L + r0 + tid];
      sum[tid] = rowSum[(size_t)s * L + r0 + tid];
    }
    __syncthreads();
    int nt = warp;
    while (nt < nTiles && 8 * nt + 7 < firstIdx) nt += kSumWarps;
    uint32_t b[D / 8], next[D / 8];
    if (nt < nTiles) sliceOf<T, D>(kRows, left + 8LL * nt + g, t, p.Nkv, b);
#pragma unroll 1
    for (; nt < nTiles; nt += kSumWarps) {
      if (nt + kSumWarps < nTiles) sliceOf<T, D>(kRows, left + 8LL * (nt + kSumWarps) + g, t, p.Nkv, next);
#pragma unroll 1
      for (int mt = 0; mt < mTiles; ++mt) {
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        const uint4* qa = qs + (r0 / 16 + mt) * kSteps * 32 + lane;
#pragma unroll
        for (int st = 0; st < kSteps; ++st) {
          const uint4 w = qa[st * 32];
          const uint32_t af[4] = {w.x, w.y, w.z, w.w};
          sm80::Mma<T>::run(c, af, b[2 * st], b[2 * st + 1]);
        }
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int rr = mt * 16 + g + 8 * hh;
          const long long key = left + 8LL * nt + 2 * t;
          float pr[2] = {0.f, 0.f};
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (rr < nRows && key + e >= rowFirst[rr] && key + e <= rowLast[rr])
              pr[e] = expf(scoreOf<T>(c[2 * hh + e], postScale) - mx[rr]) / sum[rr];
          *reinterpret_cast<float2*>(prob + rr * stride + 8 * nt + 2 * t) = make_float2(pr[0], pr[1]);
        }
      }
#pragma unroll
      for (int i = 0; i < D / 8; ++i) b[i] = next[i];
    }
    __syncthreads();
    for (int rr = 0; rr < nRows; ++rr) {
      accV += prob[rr * stride + lead + tid];
      accD += prob[rr * stride + firstIdx + rr + tid];
    }
    __syncthreads();
  }
  const long long c = c0 + tid, o = (long long)p.Nq - 1 - c;
  if (c >= 0 && c < p.Nkv)
    out.vertical[(size_t)s * p.Nkv + c] = c < out.infColumns ? INFINITY : accV / out.divisor;
  if (o >= 0 && o < out.nSlash)
    out.slash[(size_t)s * out.nSlash + o] = o < out.infDiagonals ? INFINITY : accD / out.divisor;
}

// The most rows a chunk of the fused sums takes within the device's shared memory.
int fusedRows(int Lpad, int D, int lead) {
  int dev = 0, limit = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "shared memory limit");
  const size_t fixed = size_t(Lpad) * D * 2 + kSumMaxRows * (2 * sizeof(long long) + 2 * sizeof(float));
  int rows = kSumMaxRows;
  while (rows > 16 && fixed + sizeof(float) * rows * (lead + kSumWindow + 8) > size_t(limit)) rows /= 2;
  return rows;
}

}  // namespace

bool lineSumsFused() {
  static const bool fused = !std::getenv("SPARGE_LINE_STORED");
  return fused;
}

bool lineSumsSerial() {
  static const bool serial = std::getenv("SPARGE_LINE_SERIAL") != nullptr;
  return serial;
}

size_t linePartialCount(const Problem& p, int L) {
  return size_t(slotCount(p)) * L * ((p.Nkv + kPartialKeys - 1) / kPartialKeys);
}

void launchLineSumsFused(const MethodLaunch& m, const void* lastQ, int L, int Lpad, float postScale,
                         float2* partial, float* rowMax, float* rowSum, const LineSums& out) {
  const Problem& p = m.problem;
  const int slots = slotCount(p), chunks = (p.Nkv + kPartialKeys - 1) / kPartialKeys;
  // Windows over the columns of every key and of every diagonal's last row (Nq − 1 − o).
  const long long cBase = std::min(0LL, (long long)p.Nq - out.nSlash) & ~7LL;
  const long long cEnd = std::max<long long>(p.Nkv, p.Nq);
  const int lead = (L - 1 + 7) / 8 * 8;
  const unsigned windows = unsigned((cEnd - cBase + kSumWindow - 1) / kSumWindow);
  withElem(m.qkv.et, [&](auto tag) {
    using T = decltype(tag);
    withHeadDim(p.D, "CUDA line predictors", [&](auto d) {
      constexpr int D = decltype(d)::value;
      const T* q = static_cast<const T*>(lastQ);
      const T* k = static_cast<const T*>(m.qkv.k);
      sparge_predict_line_row_partials<T, D><<<dim3(chunks, slots), 32 * (Lpad / 16), 0, m.stream>>>(
          q, k, p, L, Lpad, postScale, chunks, partial);
      checkLaunch("sparge_predict_line_row_partials");
      const int rows = slots * L;
      sparge_predict_line_row_combine<<<(rows + 7) / 8, 256, 0, m.stream>>>(partial, rows, chunks, rowMax,
                                                                            rowSum);
      checkLaunch("sparge_predict_line_row_combine");
      endPhase("row stats", m.stream);
      const int chunkRows = fusedRows(Lpad, D, lead);
      const size_t smem = size_t(Lpad) * D * 2 + sizeof(float) * chunkRows * (lead + kSumWindow + 8);
      requireSharedMemory(smem + kSumMaxRows * (2 * sizeof(long long) + 2 * sizeof(float)),
                          "sparge_predict_line_fused_sums", D);
      const auto kernel = sparge_predict_line_fused_sums<T, D>;
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
            "cudaFuncSetAttribute (line sums)");
      kernel<<<dim3(windows, slots), kSumWindow, smem, m.stream>>>(q, k, p, L, Lpad, chunkRows, lead, cBase,
                                                                   postScale, rowMax, rowSum, out);
      checkLaunch("sparge_predict_line_fused_sums");
      endPhase("line sums", m.stream);
    });
  });
}

}  // namespace sparge::cuda::predictors::lines
