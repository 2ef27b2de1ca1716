// The CUDA engine's error split (deployed / sparsity alone / quantization alone) against runs that produce
// each part directly, non-finite heads, the windowed fp32 reference and cuDNN's attention against a naive
// double precision oracle, and the engine's dense baselines.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cudnn_sdpa.h"  // kernels/src
#include "engine_fixture.h"
#include "launch.h"
#include "sparge/core/error.h"

namespace sparge::cuda {
namespace {

using core::DType;
using core::EntryData;
using fixture::makeConfig;
using fixture::makeEntry;
using fixture::Shape;

core::HeadParams sparseParams() {
  core::HeadParams p;
  p.theta = 0.3;
  p.tau = 0.9;
  p.lambda = 6;
  return p;
}

void expectSameSums(const core::ErrorSums& a, const core::ErrorSums& b, const std::string& what) {
  EXPECT_EQ(a.absDiff, b.absDiff) << what;
  EXPECT_EQ(a.absRef, b.absRef) << what;
  EXPECT_EQ(a.dot, b.dot) << what;
  EXPECT_EQ(a.normO, b.normO) << what;
  EXPECT_EQ(a.sqDiff, b.sqDiff) << what;
  EXPECT_EQ(a.count, b.count) << what;
}

TEST(CudaErrorSplit, ExactNumericsHaveNoQuantizationError) {
  REQUIRE_GPU();
  auto e = makeEntry(Shape{1, 4, 2, 700, 700, 64, DType::Float16, true}, 11, true);
  CudaEngine gpu;
  gpu.setEntry(e);
  const core::EntryResult r = gpu.run(makeConfig(core::kGeometry128x64, true, sparseParams()), {});
  for (const auto& h : r.heads) {
    expectSameSums(h.errorSparse, h.error, "head " + std::to_string(h.head));
    EXPECT_EQ(h.errorQuant.count, 0);
    EXPECT_EQ(h.errorQuant.absDiff, 0.0);
    EXPECT_GT(h.error.count, 0);
  }
  EXPECT_EQ(r.times.quantizeMs, 0.0);
}

// Each part of a quantized run's error equals the deployed error of the run that produces it alone: the same
// configuration in exact numerics (sparsity), and every head dense in the same numerics (quantization).
TEST(CudaErrorSplit, QuantizedPartsEqualTheRunsThatProduceThem) {
  REQUIRE_GPU();
  for (core::Numerics n : {core::Numerics::Int8Fp16, core::Numerics::Int8Fp8}) {
    for (const core::Geometry& g : {core::kGeometry128x64, core::kGeometry64x128}) {
      SCOPED_TRACE(std::string(core::toString(n)) + " " + g.label());
      auto e = makeEntry(Shape{1, 4, 2, 900, 900, 128, DType::Float16, true}, 12, true);
      CudaEngine gpu;
      gpu.setEntry(e);
      core::RunConfig quant = makeConfig(g, true, sparseParams());
      quant.numerics = n;
      core::EntryResult r;
      try {
        r = gpu.run(quant, {});
      } catch (const Error& err) {
        if (std::string(err.problem()).find("no quantization kernels") != std::string::npos)
          GTEST_SKIP() << err.problem();
        throw;
      }
      core::RunConfig exact = quant;
      exact.numerics = core::Numerics::None;
      const core::EntryResult rs = gpu.run(exact, {});
      core::RunConfig dense = quant;
      dense.defaults.dense = true;
      const core::EntryResult rq = gpu.run(dense, {});
      ASSERT_EQ(r.heads.size(), rs.heads.size());
      for (size_t i = 0; i < r.heads.size(); ++i) {
        const std::string head = "head " + std::to_string(r.heads[i].head);
        expectSameSums(r.heads[i].errorSparse, rs.heads[i].error, head + " sparse part");
        expectSameSums(r.heads[i].errorQuant, rq.heads[i].error, head + " quantization part");
        EXPECT_GT(r.heads[i].errorQuant.l1(), 0.0) << head;
        EXPECT_FALSE(r.heads[i].hasNonFinite) << head;
      }
      EXPECT_GT(r.times.quantizeMs, 0.0);
      // The quantization part is cached: a second run with other thresholds reports the same sums.
      core::RunConfig other = quant;
      other.defaults.tau = 0.7;
      const core::EntryResult r2 = gpu.run(other, {});
      for (size_t i = 0; i < r.heads.size(); ++i)
        expectSameSums(r2.heads[i].errorQuant, r.heads[i].errorQuant, "cached");
    }
  }
}

// A softmax scale that overflows float makes every output and reference non-finite: the heads must say so
// rather than show the L1 0 / cos 1 that NaN sums collapse to.
TEST(CudaErrorSplit, OverflowingScaleFlagsEveryHead) {
  REQUIRE_GPU();
  auto e = makeEntry(Shape{1, 2, 2, 300, 300, 64, DType::Float16, false}, 13);
  auto bad = std::make_shared<EntryData>(*e);
  bad->info.scale = 1e300;
  CudaEngine gpu;
  gpu.setEntry(bad);
  const core::EntryResult r = gpu.run(makeConfig(core::kGeometry128x64, true, sparseParams()), {});
  for (const auto& h : r.heads) EXPECT_TRUE(h.hasNonFinite) << "head " << h.head;
  EXPECT_FALSE(r.warnings.empty());
}

// The fp32 reference with causal masks and local windows against the double-precision oracle.
TEST(CudaReference, WindowsAndCausalMatchTheOracle) {
  REQUIRE_GPU();
  struct Case {
    bool causal;
    core::Window window;
  };
  for (const Case& c : {Case{false, {-1, -1}}, Case{true, {-1, -1}}, Case{true, {100, -1}},
                        Case{false, {50, 30}}, Case{false, {-1, 0}}, Case{false, {0, 20}}}) {
    SCOPED_TRACE("causal " + std::to_string(c.causal) + " window " + std::to_string(c.window.left) + "," +
                 std::to_string(c.window.right));
    auto e = makeEntry(Shape{1, 2, 1, 333, 400, 64, DType::Float16, c.causal}, 14);
    auto w = std::make_shared<EntryData>(*e);
    w->info.window = c.window;
    fixture::DeviceEntry dev(*w);
    Problem p;
    p.Hq = 2;
    p.Hkv = 1;
    p.Nq = 333;
    p.Nkv = 400;
    p.D = 64;
    p.causal = c.causal;
    p.window = c.window;
    int heads[2] = {0, 1};
    void *dheads = nullptr, *dout = nullptr, *dmass = nullptr;
    ASSERT_EQ(cudaMalloc(&dheads, sizeof heads), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dout, 2 * 333 * 64 * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dmass, 2 * 6 * 7 * sizeof(float)), cudaSuccess);
    cudaMemcpy(dheads, heads, sizeof heads, cudaMemcpyHostToDevice);
    p.heads = static_cast<int*>(dheads);
    p.nHeads = 2;
    launchReference(ElemType::F16, p, dev.q, dev.k, dev.v, w->info.scale, static_cast<float*>(dout),
                    static_cast<float*>(dmass), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> out(2 * 333 * 64);
    cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost);
    for (int h = 0; h < 2; ++h)
      EXPECT_LT(fixture::relativeL1(out.data() + h * 333 * 64, fixture::naiveAttention(*w, 0, h)), 1e-5);
    for (void* ptr : {dheads, dout, dmass}) cudaFree(ptr);
  }
}

// cuDNN's fused attention computes the same function as our reference: fp16/bf16, causal, windows, GQA.
TEST(CudnnBaseline, MatchesTheOracle) {
  REQUIRE_GPU();
  if (!cudnnAvailability().ok) GTEST_SKIP() << cudnnAvailability().reason;
  struct Case {
    Shape shape;
    core::Window window;
  };
  for (const Case& c : {Case{Shape{1, 4, 2, 1000, 1000, 64, DType::Float16, false}, {-1, -1}},
                        Case{Shape{1, 2, 2, 777, 777, 128, DType::BFloat16, true}, {-1, -1}},
                        Case{Shape{2, 2, 1, 512, 512, 64, DType::Float16, true}, {100, -1}},
                        Case{Shape{1, 2, 2, 640, 640, 128, DType::Float16, false}, {64, 32}}}) {
    const Shape& s = c.shape;
    SCOPED_TRACE("N " + std::to_string(s.Nq) + " D " + std::to_string(s.D) + " causal " +
                 std::to_string(s.causal) + " window " + std::to_string(c.window.left) + "," +
                 std::to_string(c.window.right));
    auto e = std::make_shared<EntryData>(*makeEntry(s, 15));
    e->info.window = c.window;
    fixture::DeviceEntry dev(*e);
    SdpaShape shape{s.dtype == DType::BFloat16 ? ElemType::BF16 : ElemType::F16,
                    s.B,
                    s.Hq,
                    s.Hkv,
                    s.Nq,
                    s.Nkv,
                    s.D,
                    s.causal,
                    c.window,
                    e->info.scale};
    std::unique_ptr<CudnnSdpa> sdpa;
    try {
      sdpa = std::make_unique<CudnnSdpa>(shape);
    } catch (const Error& err) {
      ADD_FAILURE() << "cuDNN refused a shape it supports: " << err.problem();
      continue;
    }
    const size_t count = (size_t)s.B * s.Hq * s.Nq * s.D;
    void* dout = nullptr;
    ASSERT_EQ(cudaMalloc(&dout, count * 2), cudaSuccess);
    sdpa->run(dev.q, dev.k, dev.v, dout, 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> out = fixture::downloadHalf(dout, count, s.dtype);
    cudaFree(dout);
    const double tol = s.dtype == DType::BFloat16 ? 1e-2 : 2e-3;  // output rounding of the half type
    for (int b = 0; b < s.B; ++b)
      for (int h = 0; h < s.Hq; ++h)
        EXPECT_LT(fixture::relativeL1(out.data() + ((size_t)b * s.Hq + h) * s.Nq * s.D,
                                      fixture::naiveAttention(*e, b, h)),
                  tol)
            << "b " << b << " h " << h;
  }
}

TEST(CudnnBaseline, EngineOffersItOrSaysWhyNot) {
  REQUIRE_GPU();
  auto e = makeEntry(Shape{1, 2, 2, 512, 512, 64, DType::Float16, true}, 16);
  CudaEngine gpu;
  gpu.setEntry(e);
  const auto baselines = gpu.denseBaselines();
  ASSERT_EQ(baselines.size(), 1u);
  EXPECT_EQ(baselines[0].name, "cudnn");
  if (!cudnnAvailability().ok) {
    EXPECT_FALSE(baselines[0].available);
    EXPECT_EQ(baselines[0].reason, cudnnAvailability().reason);
    EXPECT_THROW(gpu.runDenseBaseline("cudnn"), Error);
    return;
  }
  EXPECT_TRUE(baselines[0].available) << baselines[0].reason;
  EXPECT_NE(baselines[0].label.find("cuDNN 9."), std::string::npos) << baselines[0].label;
  EXPECT_GT(gpu.runDenseBaseline("cudnn"), 0.0);
  EXPECT_THROW(gpu.runDenseBaseline("no-such-baseline"), Error);
}

}  // namespace
}  // namespace sparge::cuda
