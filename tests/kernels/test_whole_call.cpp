// The whole call's own kernels against what the engine runs today: Stage 1's statistics fused with the INT8
// quantization of Q and K (launchBlockPass) bit for bit against launchBlockStats + launchQuantize, the same
// pass reading the self-similarity as a flag against negative θ (SimUse::FlagBelowZero: the same flags, the
// rest bit for bit), and the block flags derived on the device against the host's blockFlags(); tails, D
// 64/128/256, fp16 and bf16, both geometries, with and without K smoothing, rows that are zero, nearly zero,
// NaN or infinite. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "call/call_launch.h"
#include "common/cuda_util.h"
#include "engine/device_stages.h"
#include "engine_fixture.h"
#include "sparge/core/stage1.h"

namespace sparge::cuda {
namespace {

template <typename T>
std::vector<T> fetch(const DeviceBuffer& b, size_t n) {
  std::vector<T> x;
  download(x, b, n, "test download");
  return x;
}

// Equal bits (NaN self-similarities included).
template <typename T>
void expectSameBits(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  size_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  EXPECT_EQ(differing, 0u) << what << ": " << differing << " of " << a.size() << " differ";
}

struct FusedCase {
  int N, D, BS;
  bool bf16, smoothK;
  bool plantRows = false;  // rows 3 (zeros), 70 (a NaN), 133 (an inf), 200 (every |value| 2^-41, bf16 only)
};

// The element bits of the planted rows, written over the random data.
void plantRows(DeviceBuffer& x, size_t elems, int N, int D, bool bf16) {
  std::vector<uint16_t> h;
  download(h, x, elems, "planted rows");
  auto row = [&](int r) { return h.data() + size_t(r) * D; };  // head 0
  if (N > 3) std::fill(row(3), row(3) + D, uint16_t(0));
  if (N > 70) row(70)[D / 2] = bf16 ? 0x7fc0 : 0x7e00;
  if (N > 133) row(133)[1] = bf16 ? 0xff80 : 0xfc00;
  if (N > 200 && bf16)
    for (int d = 0; d < D; ++d) row(200)[d] = d % 2 ? 0x2b00 : 0xab00;  // ±2^-41
  ASSERT_EQ(cudaMemcpy(x.get(), h.data(), elems * 2, cudaMemcpyHostToDevice), cudaSuccess);
}

// Stage 1's flag s > θ for negative θ from the exact self-similarities and from the flag form's; the flag
// form writes each block either its exact bits or 0 where the block cannot give a NaN. Returns how many
// blocks took the 0.
size_t expectSameNegativeThetaFlags(const std::vector<float>& exact, const std::vector<float>& flagged) {
  size_t zeros = 0, wrong = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const bool same = std::memcmp(&exact[i], &flagged[i], sizeof(float)) == 0;
    zeros += !same && flagged[i] == 0.f;
    wrong += !same && !(flagged[i] == 0.f && exact[i] >= 0.f);  // 0 only where the exact s is a number >= 0
    for (double theta : {-0.1, -1e-30, -1.0}) wrong += (exact[i] > theta) != (flagged[i] > theta);
  }
  EXPECT_EQ(wrong, 0u) << "blocks whose flag or value differ, of " << exact.size();
  return zeros;
}

// A case's input: BH heads of random rows (with the planted ones), its key mean, and the mean the passes
// smooth with (null without smoothing).
struct PassInput {
  DeviceBuffer x, km, scratch;
  const void* smooth = nullptr;
  PassInput(const FusedCase& c, ElemType et, int BH, uint64_t seed) {
    const size_t elems = size_t(BH) * c.N * c.D;
    x.reserve(elems * 2, "x");
    launchRandomFill(et, x.get(), int64_t(elems), seed, 1.f, 0);
    if (c.plantRows) plantRows(x, elems, c.N, c.D, c.bf16);
    km.reserve(size_t(BH) * c.D * 2, "km");
    scratch.reserve(size_t(BH) * c.D * sizeof(double), "scratch");
    launchKeyMean(et, x.get(), BH, c.N, c.D, scratch.as<double>(), km.get(), 0);
    if (c.smoothK) smooth = km.get();
  }
};

class FusedBlockPass : public ::testing::TestWithParam<FusedCase> {};

TEST_P(FusedBlockPass, MatchesStatsAndQuantizationBitForBit) {
  REQUIRE_GPU();
  const FusedCase c = GetParam();
  const ElemType et = c.bf16 ? ElemType::BF16 : ElemType::F16;
  const int BH = 3, nb = (c.N + c.BS - 1) / c.BS;
  PassInput in(c, et, BH, 11 + c.N);
  const DeviceBuffer& x = in.x;
  const void* smooth = in.smooth;
  DeviceBuffer pooledA, simA, pooledB, simB, q8B, scaleB, ws, pooledC, simC, q8C, scaleC;
  for (auto* b : {&pooledA, &pooledB, &pooledC}) b->reserve(size_t(BH) * nb * c.D * 2, "pooled");
  for (auto* b : {&simA, &simB, &scaleB, &simC, &scaleC})
    b->reserve(size_t(BH) * nb * sizeof(float), "per block");
  for (auto* b : {&q8B, &q8C}) b->reserve(size_t(BH) * nb * c.BS * c.D, "q8");
  // Today's stages: statistics, then the quantizer's K tiles (its Q tiles take no mean), of the same tensor.
  launchBlockStats(et, x.get(), BH, c.N, c.D, c.BS, smooth, pooledA.get(), simA.as<float>(), 0);
  Problem p = makeProblem(1, BH, BH, c.N, c.N, c.D, core::Geometry{c.BS, c.BS == 64 ? 128 : 64}, false, {});
  std::swap(p.BQ, p.BK);  // K tiles of BS rows: the quantizer's K path carries the mean
  p.nk = nb;
  p.nq = (c.N + p.BQ - 1) / p.BQ;
  ws.reserve(quantWorkspaceBytes(p, core::Numerics::Int8Fp8), "quant");
  const QuantOperands ops =
      launchQuantize(et, p, core::Numerics::Int8Fp8, x.get(), x.get(), smooth, x.get(), ws.get(), 0);
  // The fused pass.
  launchBlockPass(et, x.get(), BH, c.N, c.D, c.BS, smooth, pooledB.get(), simB.as<float>(), q8B.as<int8_t>(),
                  scaleB.as<float>(), SimUse::Value, 0);
  launchBlockPass(et, x.get(), BH, c.N, c.D, c.BS, smooth, pooledC.get(), simC.as<float>(), q8C.as<int8_t>(),
                  scaleC.as<float>(), SimUse::FlagBelowZero, 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expectSameBits(fetch<uint16_t>(pooledA, size_t(BH) * nb * c.D),
                 fetch<uint16_t>(pooledB, size_t(BH) * nb * c.D), "pooled");
  expectSameBits(fetch<float>(simA, size_t(BH) * nb), fetch<float>(simB, size_t(BH) * nb), "self-similarity");
  std::vector<int8_t> q8A(size_t(BH) * nb * c.BS * c.D);
  std::vector<float> scaleA(size_t(BH) * nb);
  ASSERT_EQ(cudaMemcpy(q8A.data(), ops.k8, q8A.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(scaleA.data(), ops.kScale, scaleA.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  expectSameBits(q8A, fetch<int8_t>(q8B, q8A.size()), "INT8 tiles");
  expectSameBits(scaleA, fetch<float>(scaleB, scaleA.size()), "INT8 scales");
  // The flag form: the same pooled rows and INT8 operands, the same flags against negative θ.
  expectSameBits(fetch<uint16_t>(pooledA, size_t(BH) * nb * c.D),
                 fetch<uint16_t>(pooledC, size_t(BH) * nb * c.D), "pooled (flag form)");
  expectSameBits(q8A, fetch<int8_t>(q8C, q8A.size()), "INT8 tiles (flag form)");
  expectSameBits(scaleA, fetch<float>(scaleC, scaleA.size()), "INT8 scales (flag form)");
  const std::vector<float> exact = fetch<float>(simA, size_t(BH) * nb);
  const size_t zeros = expectSameNegativeThetaFlags(exact, fetch<float>(simC, size_t(BH) * nb));
  size_t finite = 0;  // blocks the flag form may write 0: a self-similarity that is a number, not 0 already
  for (float v : exact) finite += v == v && v != 0.f;
  EXPECT_GT(zeros, 0u) << "the flag form kept every value";
  EXPECT_LE(zeros, finite);
}

// The statistics alone in the flag form (the exact numerics' pass) against launchBlockStats.
TEST_P(FusedBlockPass, StatisticsAloneAsFlagsMatch) {
  REQUIRE_GPU();
  const FusedCase c = GetParam();
  const ElemType et = c.bf16 ? ElemType::BF16 : ElemType::F16;
  const int BH = 2, nb = (c.N + c.BS - 1) / c.BS;
  PassInput in(c, et, BH, 5 + c.N);
  const DeviceBuffer& x = in.x;
  const void* smooth = in.smooth;
  DeviceBuffer pooledA, simA, pooledC, simC;
  for (auto* b : {&pooledA, &pooledC}) b->reserve(size_t(BH) * nb * c.D * 2, "pooled");
  for (auto* b : {&simA, &simC}) b->reserve(size_t(BH) * nb * sizeof(float), "per block");
  launchBlockStats(et, x.get(), BH, c.N, c.D, c.BS, smooth, pooledA.get(), simA.as<float>(), 0);
  launchBlockPass(et, x.get(), BH, c.N, c.D, c.BS, smooth, pooledC.get(), simC.as<float>(), nullptr, nullptr,
                  SimUse::FlagBelowZero, 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expectSameBits(fetch<uint16_t>(pooledA, size_t(BH) * nb * c.D),
                 fetch<uint16_t>(pooledC, size_t(BH) * nb * c.D), "pooled (flag form)");
  EXPECT_GT(
      expectSameNegativeThetaFlags(fetch<float>(simA, size_t(BH) * nb), fetch<float>(simC, size_t(BH) * nb)),
      0u);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedBlockPass,
    ::testing::Values(FusedCase{1000, 64, 64, false, true}, FusedCase{1000, 64, 128, false, false},
                      FusedCase{777, 128, 128, true, true}, FusedCase{4096, 128, 64, false, true},
                      FusedCase{300, 256, 64, true, false}, FusedCase{130, 256, 128, false, true},
                      FusedCase{64, 128, 64, true, true}, FusedCase{1024, 128, 64, false, false, true},
                      FusedCase{1024, 128, 64, true, false, true},
                      FusedCase{640, 64, 128, true, true, true}));

TEST(WholeCallFlags, DeviceFlagsMatchTheHost) {
  REQUIRE_GPU();
  struct Case {
    int nQ, nKv;
    bool causal;
    core::Window w;
  };
  for (const Case& c : {Case{1000, 1000, true, {}}, Case{300, 900, false, {}}, Case{900, 300, true, {}},
                        Case{777, 777, false, {100, 30}}, Case{777, 1500, true, {500, -1}},
                        Case{1200, 1200, false, {-1, 0}}, Case{500, 500, false, {0, 0}}})
    for (core::Geometry g : {core::kGeometry128x64, core::kGeometry64x128}) {
      const core::BlockValidity v = core::computeBlockValidity(g, c.nQ, c.nKv, c.causal, c.w);
      const std::vector<uint8_t> want = blockFlags(v, g, c.nQ, c.nKv, c.causal, c.w);
      DeviceBuffer flags;
      flags.reserve(want.size(), "flags");
      launchBlockFlags(BlockRule{g.blockQ, g.blockK, c.nQ, c.nKv, c.causal, c.w.left, c.w.right}, v.nq, v.nk,
                       flags.as<uint8_t>(), 0);
      EXPECT_EQ(fetch<uint8_t>(flags, want.size()), want)
          << c.nQ << "x" << c.nKv << " causal " << c.causal << " window " << core::toString(c.w) << " "
          << g.label();
    }
}

}  // namespace
}  // namespace sparge::cuda
