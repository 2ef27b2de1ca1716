// Test data shared by the CUDA engine tests: clustered random entries, run configurations, a device check,
// an entry's Q/K/V on the device, and attention computed naively in double precision as an oracle.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sparge/core/capture.h"
#include "sparge/core/error.h"
#include "sparge/core/half.h"
#include "sparge/core/params.h"
#include "sparge/kernels/cuda_engine.h"

namespace sparge::cuda::fixture {

using core::DType;
using core::EntryData;
using core::Geometry;

#define REQUIRE_GPU()                                                                   \
  do {                                                                                  \
    std::string why;                                                                    \
    if (!::sparge::cuda::deviceUsable(&why)) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

// The engine's fp32 reference at head dim 256 keeps Q and K [64][264] in 16 bits and V [64][260] in fp32 in
// shared memory: 131 KB a block, which Hopper (227 KB) and sm_80 (163 KB) allow and sm_86/sm_89 (99 KB) do
// not.
inline constexpr size_t kReferenceSmemD256 = 2 * (64 * 264 * 2) + sizeof(float) * 64 * 260;
inline bool referenceFitsD256() {
  int dev = 0, limit = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  return size_t(limit) >= kReferenceSmemD256;
}

// Engine runs of D 256 entries: skips the test on a GPU whose shared memory cannot hold the reference, after
// checking that the engine says so (head dim and limit) instead of failing some other way.
#define REQUIRE_D256_ENGINE()                                                                      \
  do {                                                                                             \
    REQUIRE_GPU();                                                                                 \
    if (!::sparge::cuda::fixture::referenceFitsD256()) {                                           \
      ::sparge::cuda::fixture::expectD256Refused();                                                \
      GTEST_SKIP() << "the fp32 reference at D 256 needs more shared memory than this GPU allows"; \
    }                                                                                              \
  } while (0)

inline float roundTo(float x, DType t) {
  return t == DType::BFloat16 ? core::roundToBf16(x) : core::roundToHalf(x);
}

struct Shape {
  int B = 1, Hq = 4, Hkv = 2, Nq = 1000, Nkv = 1000, D = 64;
  DType dtype = DType::Float16;
  bool causal = false;
};

// Tokens come in segments around a few cluster centres, so block self-similarities spread over [0, 1]
// and pooled scores differ between blocks. `loud`: K blocks alternate between keys aligned with the
// queries and keys opposed to them, which makes the PV skip fire.
inline std::shared_ptr<EntryData> makeEntry(const Shape& s, uint32_t seed, bool loud = false) {
  auto e = std::make_shared<EntryData>();
  core::EntryInfo& in = e->info;
  in.name = "test";
  in.batch = s.B;
  in.headsQ = s.Hq;
  in.headsKV = s.Hkv;
  in.tokensQ = s.Nq;
  in.tokensKV = s.Nkv;
  in.headDim = in.headDimV = s.D;
  in.dtype = s.dtype;
  in.causal = s.causal;
  in.scale = 1.0 / std::sqrt(double(s.D));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> seg(30, 220);
  auto fill = [&](core::FloatBuffer& x, int heads, int n, float noise, bool isK) {
    x.resize((size_t)s.B * heads * n * s.D);
    for (int bh = 0; bh < s.B * heads; ++bh) {
      std::vector<std::vector<float>> centres(4, std::vector<float>(s.D));
      for (auto& c : centres)
        for (auto& v : c) v = nd(rng);
      int t = 0, m = 0;
      while (t < n) {
        int len = seg(rng);
        m = (m + 1 + (int)(rng() % 3)) % 4;
        for (int u = t; u < std::min(n, t + len); ++u) {
          float sign = 1.f;
          if (loud && isK) sign = ((u / 64) % 2 == 0 || u < 128) ? 1.f : -1.f;
          for (int d = 0; d < s.D; ++d) {
            float v = loud ? centres[0][d] * sign * 1.5f + noise * nd(rng) : centres[m][d] + noise * nd(rng);
            x[((size_t)bh * n + u) * s.D + d] = roundTo(v, s.dtype);
          }
        }
        t += len;
      }
    }
  };
  fill(e->q, s.Hq, s.Nq, 0.8f, false);
  fill(e->k, s.Hkv, s.Nkv, 0.8f, true);
  fill(e->v, s.Hkv, s.Nkv, 1.0f, false);
  return e;
}

// Thresholds that select part of each row and skip some PV blocks on makeEntry(..., loud = true) data.
inline core::HeadParams sparseParams() {
  core::HeadParams p;
  p.theta = 0.3;
  p.tau = 0.9;
  p.lambda = 6;
  return p;
}

inline core::RunConfig makeConfig(const Geometry& g, bool smoothK, const core::HeadParams& p,
                                  bool sink = false) {
  core::RunConfig c;
  c.geometry = g;
  c.smoothK = smoothK;
  c.sink = sink;
  c.defaults = p;
  return c;
}

inline void expectD256Refused() {
  CudaEngine gpu;
  gpu.setEntry(makeEntry(Shape{1, 1, 1, 128, 128, 256, DType::Float16, false}, 1));
  try {
    gpu.run(makeConfig(core::kGeometry128x64, true, core::HeadParams{}), core::RunOptions{});
    ADD_FAILURE() << "a D 256 run on this GPU should be refused";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("head dim 256"), std::string::npos) << msg;
    EXPECT_NE(msg.find("shared memory"), std::string::npos) << msg;
  }
}

// Q, K and V of an entry on the device in its half dtype (bf16 stays bf16, anything else is fp16).
struct DeviceEntry {
  void *q = nullptr, *k = nullptr, *v = nullptr;
  explicit DeviceEntry(const EntryData& e) {
    q = upload(e.q, e.info.dtype);
    k = upload(e.k, e.info.dtype);
    v = upload(e.v, e.info.dtype);
  }
  ~DeviceEntry() {
    for (void* p : {q, k, v}) cudaFree(p);
  }
  DeviceEntry(const DeviceEntry&) = delete;
  DeviceEntry& operator=(const DeviceEntry&) = delete;

  static void* upload(const core::FloatBuffer& x, DType t) {
    std::vector<uint16_t> bits(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      bits[i] = t == DType::BFloat16 ? core::floatToBf16(x[i]) : core::floatToHalf(x[i]);
    void* d = nullptr;
    if (cudaMalloc(&d, bits.size() * 2) != cudaSuccess) return nullptr;
    cudaMemcpy(d, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice);
    return d;
  }
};

// Half-precision device output [count] as floats.
inline std::vector<float> downloadHalf(const void* d, size_t count, DType t) {
  std::vector<uint16_t> bits(count);
  cudaMemcpy(bits.data(), d, count * 2, cudaMemcpyDeviceToHost);
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i)
    out[i] = t == DType::BFloat16 ? core::bf16ToFloat(bits[i]) : core::halfToFloat(bits[i]);
  return out;
}

// softmax(scale · q·kᵀ) v over the keys core::visibleKeys allows, in double, for one (batch, query head):
// [Nq][D]; rows that see no key are 0.
inline std::vector<double> naiveAttention(const EntryData& e, int64_t b, int64_t h) {
  const core::EntryInfo& in = e.info;
  const float* q = e.qHead(b, h);
  const float* k = e.kHead(b, in.kvHeadOf(h));
  const float* v = e.vHead(b, in.kvHeadOf(h));
  const int64_t D = in.headDim;
  std::vector<double> out(size_t(in.tokensQ * D), 0.0), s(size_t(in.tokensKV));
  for (int64_t i = 0; i < in.tokensQ; ++i) {
    const core::KeyRange r = core::visibleKeys(i, in.tokensKV, in.causal, in.window);
    if (r.empty()) continue;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = r.first; j <= r.last; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += double(q[i * D + d]) * double(k[j * D + d]);
      s[j] = dot * in.scale;
      mx = std::max(mx, s[j]);
    }
    for (int64_t j = r.first; j <= r.last; ++j) sum += (s[j] = std::exp(s[j] - mx));
    for (int64_t j = r.first; j <= r.last; ++j)
      for (int64_t d = 0; d < D; ++d) out[size_t(i * D + d)] += s[j] / sum * double(v[j * D + d]);
  }
  return out;
}

// Σ|got - want| / Σ|want| over one head.
inline double relativeL1(const float* got, const std::vector<double>& want) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += std::fabs(double(got[i]) - want[i]);
    ref += std::fabs(want[i]);
  }
  return ref > 0 ? diff / ref : diff;
}

}  // namespace sparge::cuda::fixture
