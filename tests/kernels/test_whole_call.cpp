// The whole call's own kernels against what the engine runs today: Stage 1's statistics fused with the INT8
// quantization of Q and K (launchBlockPass) bit for bit against launchBlockStats + launchQuantize, and the
// block flags derived on the device against the host's blockFlags(); tails, D 64/128/256, fp16 and bf16, both
// geometries, with and without K smoothing. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

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
};

class FusedBlockPass : public ::testing::TestWithParam<FusedCase> {};

TEST_P(FusedBlockPass, MatchesStatsAndQuantizationBitForBit) {
  REQUIRE_GPU();
  const FusedCase c = GetParam();
  const ElemType et = c.bf16 ? ElemType::BF16 : ElemType::F16;
  const int BH = 3, nb = (c.N + c.BS - 1) / c.BS;
  const size_t elems = size_t(BH) * c.N * c.D;
  DeviceBuffer x, km, scratch, pooledA, simA, pooledB, simB, q8B, scaleB, ws;
  x.reserve(elems * 2, "x");
  launchRandomFill(et, x.get(), int64_t(elems), 11 + c.N, 1.f, 0);
  km.reserve(size_t(BH) * c.D * 2, "km");
  scratch.reserve(size_t(BH) * c.D * sizeof(double), "scratch");
  launchKeyMean(et, x.get(), BH, c.N, c.D, scratch.as<double>(), km.get(), 0);
  const void* smooth = c.smoothK ? km.get() : nullptr;
  for (auto* b : {&pooledA, &pooledB}) b->reserve(size_t(BH) * nb * c.D * 2, "pooled");
  for (auto* b : {&simA, &simB, &scaleB}) b->reserve(size_t(BH) * nb * sizeof(float), "per block");
  q8B.reserve(size_t(BH) * nb * c.BS * c.D, "q8");
  // Today's stages: statistics, then the quantizer's K tiles (its Q tiles take no mean), of the same tensor.
  launchBlockStats(et, x.get(), BH, c.N, c.D, c.BS, smooth, pooledA.get(), simA.as<float>(), 0);
  Problem p = makeProblem(1, BH, BH, c.N, c.N, c.D, core::Geometry{c.BS, c.BS == 64 ? 128 : 64}, false, {});
  std::swap(p.BQ, p.BK);  // K tiles of BS rows: the quantizer's K path carries the mean
  p.nk = nb;
  p.nq = (c.N + p.BQ - 1) / p.BQ;
  ws.reserve(quantWorkspaceBytes(p, core::Numerics::Int8Fp8), "quant");
  const QuantOperands ops = launchQuantize(et, p, core::Numerics::Int8Fp8, x.get(), x.get(),
                                           c.smoothK ? km.get() : nullptr, x.get(), ws.get(), 0);
  // The fused pass.
  launchBlockPass(et, x.get(), BH, c.N, c.D, c.BS, smooth, pooledB.get(), simB.as<float>(), q8B.as<int8_t>(),
                  scaleB.as<float>(), 0);
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
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedBlockPass,
    ::testing::Values(FusedCase{1000, 64, 64, false, true}, FusedCase{1000, 64, 128, false, false},
                      FusedCase{777, 128, 128, true, true}, FusedCase{4096, 128, 64, false, true},
                      FusedCase{300, 256, 64, true, false}, FusedCase{130, 256, 128, false, true},
                      FusedCase{64, 128, 64, true, true}));

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
