// The CUDA engine's error split (deployed / sparsity alone / quantization alone) against runs that produce
// each part directly, runs of head subsets and what they copy, non-finite heads, the windowed fp32 reference
// and cuDNN's attention against a naive double precision oracle, and the engine's dense baselines.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/cudnn_sdpa.h"
#include "engine_fixture.h"
#include "common/launch.h"
#include "sparge/core/error.h"
#include "sparge/core/stage1.h"

namespace sparge::cuda {
namespace {

using core::DType;
using core::EntryData;
using fixture::makeConfig;
using fixture::makeEntry;
using fixture::Shape;
using fixture::sparseParams;

// Equal sums, or NaN on both sides (a head whose inputs hold NaN).
void expectSameSums(const core::ErrorSums& a, const core::ErrorSums& b, const std::string& what) {
  auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  EXPECT_PRED2(same, a.absDiff, b.absDiff) << what;
  EXPECT_PRED2(same, a.absRef, b.absRef) << what;
  EXPECT_PRED2(same, a.dot, b.dot) << what;
  EXPECT_PRED2(same, a.normO, b.normO) << what;
  EXPECT_PRED2(same, a.sqDiff, b.sqDiff) << what;
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
void checkQuantizedSplit(int headDim) {
  for (core::Numerics n : {core::Numerics::Int8Fp16, core::Numerics::Int8Fp8}) {
    for (const core::Geometry& g : {core::kGeometry128x64, core::kGeometry64x128}) {
      SCOPED_TRACE(std::string(core::toString(n)) + " " + g.label() + " D " + std::to_string(headDim));
      auto e = makeEntry(Shape{1, 4, 2, 900, 900, headDim, DType::Float16, true}, 12, true);
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

TEST(CudaErrorSplit, QuantizedPartsEqualTheRunsThatProduceThem) {
  REQUIRE_GPU();
  checkQuantizedSplit(128);
}

TEST(CudaErrorSplit, QuantizedPartsEqualTheRunsThatProduceThemAtHeadDim256) {
  REQUIRE_D256_ENGINE();
  checkQuantizedSplit(256);
}

// Exact numerics at D 256: the deployed error is the sparse part, the quantization part is empty, and a dense
// run is only half-precision rounding away from the reference.
TEST(CudaErrorSplit, ExactNumericsAtHeadDim256) {
  REQUIRE_D256_ENGINE();
  auto e = makeEntry(Shape{1, 4, 2, 700, 700, 256, DType::BFloat16, true}, 15, true);
  CudaEngine gpu;
  gpu.setEntry(e);
  for (const core::Geometry& g : {core::kGeometry128x64, core::kGeometry64x128}) {
    SCOPED_TRACE(g.label());
    const core::EntryResult r = gpu.run(makeConfig(g, true, sparseParams()), {});
    for (const auto& h : r.heads) {
      expectSameSums(h.errorSparse, h.error, "head " + std::to_string(h.head));
      EXPECT_EQ(h.errorQuant.count, 0);
      EXPECT_GT(h.error.count, 0);
    }
    core::HeadParams dense;
    dense.dense = true;
    for (const auto& h : gpu.run(makeConfig(g, true, dense), {}).heads) {
      EXPECT_LT(h.error.l1(), 1e-2) << "head " << h.head;  // bf16 rounding of the output only
      EXPECT_GT(h.error.cosSim(), 0.9999) << "head " << h.head;
    }
  }
}

// Everything a head's result carries, bit for bit (NaN P̂ of all-masked rows included).
template <typename T>
bool sameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
void expectSameHead(const core::HeadResult& a, const core::HeadResult& b, const std::string& what) {
  SCOPED_TRACE(what + ", head " + std::to_string(a.head));
  EXPECT_EQ(a.head, b.head);
  EXPECT_TRUE(a.params == b.params);
  EXPECT_EQ(a.blockMask, b.blockMask);
  EXPECT_EQ(a.reasons, b.reasons);
  EXPECT_EQ(a.pvSkipped, b.pvSkipped);
  EXPECT_TRUE(sameBits(a.pooledProb, b.pooledProb));
  EXPECT_TRUE(sameBits(a.selfSimQ, b.selfSimQ));
  EXPECT_TRUE(sameBits(a.selfSimK, b.selfSimK));
  EXPECT_EQ(a.similarQ, b.similarQ);
  EXPECT_TRUE(sameBits(a.refBlockMass, b.refBlockMass));
  EXPECT_TRUE(sameBits(a.qBlockL1, b.qBlockL1));
  EXPECT_EQ(a.sparsity.selectedBlocks, b.sparsity.selectedBlocks);
  EXPECT_EQ(a.sparsity.skippedPvBlocks, b.sparsity.skippedPvBlocks);
  EXPECT_EQ(a.sparsity.computedPvArea, b.sparsity.computedPvArea);
  expectSameSums(a.error, b.error, "deployed");
  expectSameSums(a.errorSparse, b.errorSparse, "sparsity part");
  expectSameSums(a.errorQuant, b.errorQuant, "quantization part");
  EXPECT_EQ(a.emptyRows, b.emptyRows);
  EXPECT_EQ(a.hasNonFinite, b.hasNonFinite);
}

// Runs of some heads copy only those heads and equal the same heads of a run of all; the bytes copied are the
// arrays of the heads run: mask, reasons, P̂ (4 bytes), PV skips, empty rows and the error sums.
TEST(CudaEngineCopies, HeadSubsetsEqualTheFullRunAndCopyOnlyTheirHeads) {
  REQUIRE_GPU();
  const Shape s{2, 4, 2, 700, 650, 64, DType::Float16, false};
  auto e = makeEntry(s, 19, true);
  CudaEngine gpu;
  gpu.setEntry(e);
  const core::RunConfig c = makeConfig(core::kGeometry64x128, true, sparseParams());
  const core::EntryResult all = gpu.run(c, {});
  const int64_t nq = (700 + 63) / 64, nk = (650 + 127) / 128;
  auto bytesFor = [&](int64_t heads) { return heads * s.B * (nq * nk * 7 + 4 + nq * 8 * 8); };
  EXPECT_EQ(all.times.copyBytes, bytesFor(s.Hq));
  for (const std::vector<int64_t>& heads : {std::vector<int64_t>{2}, std::vector<int64_t>{1, 3}}) {
    core::RunOptions o;
    o.heads = heads;
    const core::EntryResult part = gpu.run(c, o);
    EXPECT_EQ(part.times.copyBytes, bytesFor((int64_t)heads.size()));
    ASSERT_EQ(part.heads.size(), heads.size() * s.B);
    for (const core::HeadResult& h : part.heads)
      expectSameHead(h, *all.find(h.batch, h.head), "subset of heads");
  }
  const core::EntryResult again = gpu.run(c, {});
  for (size_t i = 0; i < all.heads.size(); ++i) expectSameHead(again.heads[i], all.heads[i], "second run");
  const core::StageTimes& t = again.times;
  EXPECT_GT(t.hostMs, 0.0);
  EXPECT_LE(t.hostQueueMs + t.hostWaitMs + t.hostResultsMs, t.hostMs);
  EXPECT_GT(t.copyMs, 0.0);
}

// A run cancelled after its selection's copies were queued leaves them in flight; the next run (other
// thresholds, then the first ones again) orders its selection after them and reports what a fresh engine
// reports (without smooth-K, whose key mean two engines may sum in different orders).
TEST(CudaEngineCopies, ACancelledRunLeavesNothingBehind) {
  REQUIRE_GPU();
  auto e = makeEntry(Shape{1, 4, 2, 800, 800, 64, DType::Float16, true}, 20, true);
  const core::RunConfig c = makeConfig(core::kGeometry128x64, false, sparseParams());
  CudaEngine fresh, gpu;
  fresh.setEntry(e);
  gpu.setEntry(e);
  const core::EntryResult want = fresh.run(c, {});
  core::CancelFlag cancel{true};
  core::RunOptions o;
  o.cancel = &cancel;
  core::RunConfig other = c;
  other.defaults.tau = 0.6;
  EXPECT_THROW(gpu.run(other, o), core::Cancelled);
  cancel = false;
  gpu.run(other, o);
  cancel = true;
  EXPECT_THROW(gpu.run(other, o), core::Cancelled);
  const core::EntryResult got = gpu.run(c, {});
  ASSERT_EQ(got.heads.size(), want.heads.size());
  for (size_t i = 0; i < want.heads.size(); ++i) expectSameHead(got.heads[i], want.heads[i], "after cancel");
}

// One engine taken from entry to entry (as a tuner does; it keeps the buffers of alike entries) reports
// what a fresh engine reports for each: two entries of one shape (the second with NaN in a head), another
// shape, then the first entry again. Quantized numerics, so the error split's buffers are reused too.
TEST(CudaEngineCopies, AnEngineMovingBetweenEntriesReportsWhatFreshEnginesDo) {
  REQUIRE_GPU();
  const Shape alike{1, 4, 2, 700, 700, 128, DType::Float16, true};
  auto a = makeEntry(alike, 31, true);
  auto b = makeEntry(alike, 32, true);
  auto poisoned = std::make_shared<core::EntryData>(*b);
  poisoned->q[size_t(2 * 700 * 128 + 5)] = std::numeric_limits<float>::quiet_NaN();  // head 2 only
  auto other = makeEntry(Shape{1, 2, 1, 500, 600, 64, DType::BFloat16, false}, 33, true);
  core::RunConfig c = makeConfig(core::kGeometry128x64, false, sparseParams());
  c.numerics = core::Numerics::Int8Fp8;
  CudaEngine gpu;
  int step = 0;
  for (const auto& e : {a, poisoned, other, a}) {
    CudaEngine fresh;
    fresh.setEntry(e);
    gpu.setEntry(e);
    const core::EntryResult want = fresh.run(c, {});
    const core::EntryResult got = gpu.run(c, {});
    ASSERT_EQ(got.heads.size(), want.heads.size());
    for (size_t i = 0; i < want.heads.size(); ++i)
      expectSameHead(got.heads[i], want.heads[i], "entry " + std::to_string(step));
    ++step;
  }
}

// An early result (RunOptions::onDeployed) is the final result without the sparsity part of the split: the
// final one equals a plain run's bit for bit; a callback that answers false ends the run at the early result
// (run() returns no heads), and the engine's next run is still a plain run's.
TEST(CudaErrorSplit, AnEarlyResultIsTheFinalOneWithoutTheSparsityPart) {
  REQUIRE_GPU();
  auto e = makeEntry(Shape{1, 4, 2, 900, 900, 128, DType::Float16, true}, 34, true);
  core::RunConfig c = makeConfig(core::kGeometry128x64, false, sparseParams());
  c.numerics = core::Numerics::Int8Fp8;
  CudaEngine gpu;
  gpu.setEntry(e);
  const core::EntryResult want = gpu.run(c, {});
  EXPECT_FALSE(want.splitPending);
  for (bool goOn : {true, false}) {
    SCOPED_TRACE(goOn ? "split computed" : "stopped at the early result");
    std::vector<core::EntryResult> early;
    core::RunOptions o;
    o.onDeployed = [&](std::shared_ptr<const core::EntryResult> r) {
      early.push_back(*r);
      return goOn;
    };
    const core::EntryResult got = gpu.run(c, o);
    ASSERT_EQ(early.size(), 1u);
    EXPECT_TRUE(early[0].splitPending);
    ASSERT_EQ(early[0].heads.size(), want.heads.size());
    for (size_t i = 0; i < want.heads.size(); ++i) {
      core::HeadResult h = early[0].heads[i];
      EXPECT_EQ(h.errorSparse.count, 0);
      h.errorSparse = want.heads[i].errorSparse;
      expectSameHead(h, want.heads[i], "early");
    }
    EXPECT_EQ(got.splitPending, !goOn);
    EXPECT_EQ(got.heads.size(), goOn ? want.heads.size() : 0u);  // stopped: the figures were handed over
    for (size_t i = 0; goOn && i < want.heads.size(); ++i)
      expectSameHead(got.heads[i], want.heads[i], "final");
    EXPECT_EQ(got.errorSparse.count, goOn ? want.errorSparse.count : 0);
  }
  const core::EntryResult again = gpu.run(c, {});
  for (size_t i = 0; i < want.heads.size(); ++i) expectSameHead(again.heads[i], want.heads[i], "after");
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

// A dense run of an entry with a local window: every block core calls valid is computed, and the output is
// the windowed attention of the reference (fp16 rounding only), for both geometries.
void checkWindowedDenseRuns(int headDim) {
  for (const core::Window w : {core::Window{100, -1}, core::Window{64, 32}}) {
    for (bool causal : {false, true}) {
      auto e = std::make_shared<EntryData>(
          *makeEntry(Shape{1, 2, 2, 600, 600, headDim, DType::Float16, causal}, 17));
      e->info.window = w;
      CudaEngine gpu;
      gpu.setEntry(e);
      core::HeadParams dense;
      dense.dense = true;
      for (const core::Geometry& g : {core::kGeometry128x64, core::kGeometry64x128}) {
        SCOPED_TRACE("window " + std::to_string(w.left) + "," + std::to_string(w.right) + " causal " +
                     std::to_string(causal) + " " + g.label() + " D " + std::to_string(headDim));
        const core::BlockValidity v = core::computeBlockValidity(g, 600, 600, causal, w);
        int64_t valid = 0;
        for (uint8_t x : v.valid) valid += x;
        const core::EntryResult r = gpu.run(makeConfig(g, true, dense), {});
        for (const auto& h : r.heads) {
          EXPECT_EQ(h.sparsity.validBlocks, valid);
          EXPECT_EQ(h.sparsity.selectedBlocks, valid);
          EXPECT_LT(h.error.l1(), 5e-3) << "head " << h.head;
          EXPECT_FALSE(h.hasNonFinite);
        }
      }
    }
  }
}

TEST(CudaEngineWindow, DenseRunsMatchTheReferenceOverCoresValidBlocks) {
  REQUIRE_GPU();
  checkWindowedDenseRuns(64);
}

TEST(CudaEngineWindow, DenseRunsMatchTheReferenceAtHeadDim256) {
  REQUIRE_D256_ENGINE();
  checkWindowedDenseRuns(256);
}

// The fp32 reference with causal masks and local windows against the double-precision oracle.
void checkReference(int D) {
  struct Case {
    bool causal;
    core::Window window;
  };
  for (const Case& c : {Case{false, {-1, -1}}, Case{true, {-1, -1}}, Case{true, {100, -1}},
                        Case{false, {50, 30}}, Case{false, {-1, 0}}, Case{false, {0, 20}}}) {
    SCOPED_TRACE("causal " + std::to_string(c.causal) + " window " + std::to_string(c.window.left) + "," +
                 std::to_string(c.window.right) + " D " + std::to_string(D));
    auto e = makeEntry(Shape{1, 2, 1, 333, 400, D, DType::Float16, c.causal}, 14);
    auto w = std::make_shared<EntryData>(*e);
    w->info.window = c.window;
    fixture::DeviceEntry dev(*w);
    Problem p;
    p.Hq = 2;
    p.Hkv = 1;
    p.Nq = 333;
    p.Nkv = 400;
    p.D = D;
    p.causal = c.causal;
    p.window = c.window;
    int heads[2] = {0, 1};
    void *dheads = nullptr, *dout = nullptr, *dmass = nullptr;
    const size_t headOut = size_t(333) * D;
    ASSERT_EQ(cudaMalloc(&dheads, sizeof heads), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dout, 2 * headOut * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dmass, 2 * 6 * 7 * sizeof(float)), cudaSuccess);
    cudaMemcpy(dheads, heads, sizeof heads, cudaMemcpyHostToDevice);
    p.heads = static_cast<int*>(dheads);
    p.nHeads = 2;
    launchReference(ElemType::F16, p, dev.q, dev.k, dev.v, w->info.scale, static_cast<float*>(dout),
                    static_cast<float*>(dmass), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> out(2 * headOut);
    cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost);
    for (int h = 0; h < 2; ++h)
      EXPECT_LT(fixture::relativeL1(out.data() + h * headOut, fixture::naiveAttention(*w, 0, h)), 1e-5);
    for (void* ptr : {dheads, dout, dmass}) cudaFree(ptr);
  }
}

TEST(CudaReference, WindowsAndCausalMatchTheOracle) {
  REQUIRE_GPU();
  checkReference(64);
}

TEST(CudaReference, WindowsAndCausalMatchTheOracleAtHeadDim256) {
  REQUIRE_D256_ENGINE();
  checkReference(256);
}

// Launchers outside the attention library refuse other head dims with the common message before any launch.
TEST(CudaReference, OtherHeadDimsAreAClearError) {
  for (int D : {32, 96, 192}) {
    Problem p;
    p.Nq = p.Nkv = 256, p.D = D, p.nq = 2, p.nk = 4;
    for (int which = 0; which < 3; ++which) {
      SCOPED_TRACE("D " + std::to_string(D) + " launcher " + std::to_string(which));
      try {
        if (which == 0)
          launchReference(ElemType::F16, p, nullptr, nullptr, nullptr, 1.0, nullptr, nullptr, 0);
        if (which == 1) launchBlockStats(ElemType::F16, nullptr, 1, 256, D, 64, nullptr, nullptr, nullptr, 0);
        if (which == 2) launchScores(ElemType::BF16, p, nullptr, nullptr, nullptr, 0);
        ADD_FAILURE() << "expected sparge::Error";
      } catch (const sparge::Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("head dim " + std::to_string(D) + " is not supported"), std::string::npos) << msg;
        EXPECT_NE(msg.find("64, 128 or 256"), std::string::npos) << msg;
      }
    }
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
