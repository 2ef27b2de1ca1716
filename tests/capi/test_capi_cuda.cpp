// The C API's CUDA backend against the CUDA engine on the same entries and parameters: block masks, PV-skip
// maps, per-head counters and outputs equal bit for bit (the same kernels on the same operands); NHD against
// HND; a run captured in a CUDA graph against a direct run, also as a thread's first run; runs queued back
// to back on one workspace; argument checks that need a device. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sparge/attention.h"
#include "sparge/core/half.h"
#include "sparge/kernels/cuda_engine.h"

namespace {

using namespace sparge;

#define REQUIRE_GPU()                                                                   \
  do {                                                                                  \
    std::string why;                                                                    \
    if (!::sparge::cuda::deviceUsable(&why)) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

struct Config {
  int B = 1, Hq = 4, Hkv = 2, Nq = 1000, Nkv = 1000, D = 64;
  bool bf16 = false, causal = false, topk = false, sink = false;
  core::Window window;
  core::Geometry geometry = core::kGeometry64x128;
  core::Numerics numerics = core::Numerics::Int8Fp8;
  std::vector<uint8_t> exact;  // per head, may be empty
};

sparge_attn_numerics apiNumerics(core::Numerics n) {
  return n == core::Numerics::None       ? SPARGE_ATTN_NUMERICS_NONE
         : n == core::Numerics::Int8Fp16 ? SPARGE_ATTN_NUMERICS_INT8_FP16
                                         : SPARGE_ATTN_NUMERICS_INT8_FP8;
}

// Device memory freed at scope exit.
struct DevMem {
  void* p = nullptr;
  explicit DevMem(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~DevMem() { cudaFree(p); }
  template <typename T>
  std::vector<T> get(size_t n) const {
    std::vector<T> x(n);
    EXPECT_EQ(cudaMemcpy(x.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return x;
  }
};

// Random half inputs: the bits (for the C API) and the entry (for the engine) hold the same values.
struct Inputs {
  std::vector<uint16_t> q, k, v;
  std::shared_ptr<core::EntryData> entry;
};

std::vector<uint16_t> randomBits(size_t n, bool bf16, std::mt19937& rng, std::vector<float>* values) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<uint16_t> bits(n);
  values->resize(n);
  for (size_t i = 0; i < n; ++i) {
    bits[i] = bf16 ? core::floatToBf16(dist(rng)) : core::floatToHalf(dist(rng));
    (*values)[i] = bf16 ? core::bf16ToFloat(bits[i]) : core::halfToFloat(bits[i]);
  }
  return bits;
}

Inputs makeInputs(const Config& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Inputs in;
  in.entry = std::make_shared<core::EntryData>();
  core::EntryInfo& i = in.entry->info;
  i.name = "e";
  i.batch = c.B;
  i.headsQ = c.Hq;
  i.headsKV = c.Hkv;
  i.tokensQ = c.Nq;
  i.tokensKV = c.Nkv;
  i.headDim = i.headDimV = c.D;
  i.dtype = c.bf16 ? core::DType::BFloat16 : core::DType::Float16;
  i.causal = c.causal;
  i.window = c.window;
  i.scale = 1.0 / std::sqrt(double(c.D));
  std::vector<float> f;
  in.q = randomBits(size_t(c.B) * c.Hq * c.Nq * c.D, c.bf16, rng, &f);
  in.entry->q.assign(f.begin(), f.end());
  in.k = randomBits(size_t(c.B) * c.Hkv * c.Nkv * c.D, c.bf16, rng, &f);
  in.entry->k.assign(f.begin(), f.end());
  in.v = randomBits(size_t(c.B) * c.Hkv * c.Nkv * c.D, c.bf16, rng, &f);
  in.entry->v.assign(f.begin(), f.end());
  return in;
}

// Per-head parameters that differ between heads (θ, selection, λ, one dense head).
std::vector<core::HeadParams> headParams(const Config& c) {
  std::vector<core::HeadParams> hp(size_t(c.Hq));
  for (int h = 0; h < c.Hq; ++h) {
    hp[h].theta = h % 2 ? 0.3 : -0.1;
    hp[h].mode = c.topk ? core::SelectMode::TopK : core::SelectMode::Cdf;
    hp[h].tau = 0.7 + 0.05 * h;
    hp[h].topk = 0.2 + 0.1 * h;
    hp[h].lambda = 1.0 + h;
    hp[h].dense = h == c.Hq - 1;
  }
  return hp;
}

struct ApiRun {
  std::vector<uint16_t> o;
  std::vector<uint8_t> mask, skipped;
  std::vector<int64_t> stats;
};

sparge_attn_problem problemOf(const Config& c) {
  sparge_attn_problem p;
  sparge_attn_problem_init(&p);
  p.batch = c.B;
  p.heads_q = c.Hq;
  p.heads_kv = c.Hkv;
  p.tokens_q = c.Nq;
  p.tokens_kv = c.Nkv;
  p.head_dim = c.D;
  p.dtype = c.bf16 ? SPARGE_ATTN_BFLOAT16 : SPARGE_ATTN_FLOAT16;
  p.numerics = apiNumerics(c.numerics);
  p.backend = SPARGE_ATTN_BACKEND_CUDA;
  p.causal = c.causal;
  p.window_left = c.window.left;
  p.window_right = c.window.right;
  p.block_q = c.geometry.blockQ;
  p.block_k = c.geometry.blockK;
  p.attention_sink = c.sink;
  return p;
}

// Owns the arrays a sparge_attn_head_params points at.
struct ApiParams {
  std::vector<double> theta, sel, lambda;
  std::vector<uint8_t> dense, exact;
  sparge_attn_head_params hp{};
  ApiParams(const Config& c, const std::vector<core::HeadParams>& p) {
    for (const core::HeadParams& x : p) {
      theta.push_back(x.theta);
      sel.push_back(c.topk ? x.topk : x.tau);
      lambda.push_back(x.lambda);
      dense.push_back(x.dense);
    }
    exact = c.exact;
    hp.struct_size = sizeof(hp);
    hp.heads = c.Hq;
    hp.select = c.topk ? SPARGE_ATTN_SELECT_TOPK : SPARGE_ATTN_SELECT_CDF;
    hp.simthreshd1 = theta.data();
    (c.topk ? hp.topk : hp.cdfthreshd) = sel.data();
    hp.pvthreshd = lambda.data();
    hp.dense = dense.data();
    hp.exact = exact.empty() ? nullptr : exact.data();
  }
};

ApiRun runApi(const Config& c, const Inputs& in, const sparge_attn_problem& p,
              cudaStream_t stream = nullptr) {
  sparge_attn_plan* plan = nullptr;
  EXPECT_EQ(sparge_attn_plan_create(&p, &plan), SPARGE_ATTN_OK) << sparge_attn_last_error();
  size_t wsBytes = 0;
  int32_t nq = 0, nk = 0;
  sparge_attn_plan_workspace_size(plan, &wsBytes);
  sparge_attn_plan_grid(plan, &nq, &nk, nullptr, nullptr);
  const size_t bh = size_t(c.B) * c.Hq, grid = bh * nq * nk;
  DevMem q(in.q.size() * 2), k(in.k.size() * 2), v(in.v.size() * 2), o(bh * c.Nq * c.D * 2), ws(wsBytes),
      mask(grid), skipped(grid), stats(bh * SPARGE_ATTN_STATS * 8);
  cudaMemcpy(q.p, in.q.data(), in.q.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(k.p, in.k.data(), in.k.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(v.p, in.v.data(), in.v.size() * 2, cudaMemcpyHostToDevice);
  ApiParams params(c, headParams(c));
  sparge_attn_outputs out{};
  out.struct_size = sizeof(out);
  out.block_mask = static_cast<uint8_t*>(mask.p);
  out.pv_skipped = static_cast<uint8_t*>(skipped.p);
  out.head_stats = static_cast<int64_t*>(stats.p);
  EXPECT_EQ(sparge_attn_run(plan, q.p, k.p, v.p, o.p, &params.hp, &out, ws.p, wsBytes, stream),
            SPARGE_ATTN_OK)
      << sparge_attn_last_error();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  sparge_attn_plan_destroy(plan);
  return {o.get<uint16_t>(bh * c.Nq * c.D), mask.get<uint8_t>(grid), skipped.get<uint8_t>(grid),
          stats.get<int64_t>(bh * SPARGE_ATTN_STATS)};
}

// The engine's results for heads whose exact flag is `exact` (all heads when the config has none).
std::vector<core::HeadResult> runEngine(const Config& c, const Inputs& in, bool exact) {
  cuda::CudaEngine engine;
  engine.setEntry(in.entry);
  core::RunConfig rc;
  rc.geometry = c.geometry;
  rc.numerics = exact ? core::Numerics::None : c.numerics;
  rc.sink = c.sink;
  rc.perHead = headParams(c);
  core::RunOptions o;
  o.keepOutput = true;
  o.computeError = false;
  for (int h = 0; h < c.Hq; ++h)
    if (c.exact.empty() ? !exact : bool(c.exact[h]) == exact) o.heads.push_back(h);
  if (o.heads.empty()) return {};
  return engine.run(rc, o).heads;
}

void expectSameAsEngine(const Config& c, uint32_t seed) {
  const Inputs in = makeInputs(c, seed);
  const ApiRun api = runApi(c, in, problemOf(c));
  const int nq = int(core::ceilDiv(c.Nq, c.geometry.blockQ)),
            nk = int(core::ceilDiv(c.Nkv, c.geometry.blockK));
  for (bool exact : {false, true})
    for (const core::HeadResult& hr : runEngine(c, in, exact)) {
      const size_t bh = size_t(hr.batch) * c.Hq + hr.head, grid = size_t(nq) * nk;
      SCOPED_TRACE("head " + std::to_string(hr.head) + " batch " + std::to_string(hr.batch));
      EXPECT_TRUE(std::equal(hr.blockMask.begin(), hr.blockMask.end(), api.mask.begin() + bh * grid));
      EXPECT_TRUE(std::equal(hr.pvSkipped.begin(), hr.pvSkipped.end(), api.skipped.begin() + bh * grid));
      const int64_t* s = api.stats.data() + bh * SPARGE_ATTN_STATS;
      EXPECT_EQ(s[SPARGE_ATTN_STAT_VALID_BLOCKS], hr.sparsity.validBlocks);
      EXPECT_EQ(s[SPARGE_ATTN_STAT_SELECTED_BLOCKS], hr.sparsity.selectedBlocks);
      EXPECT_EQ(s[SPARGE_ATTN_STAT_SKIPPED_PV], hr.sparsity.skippedPvBlocks);
      EXPECT_EQ(s[SPARGE_ATTN_STAT_EMPTY_ROWS], hr.emptyRows);
      size_t differing = 0;
      for (size_t x = 0; x < hr.output.size(); ++x) {
        const uint16_t bits = api.o[bh * c.Nq * c.D + x];
        const float got = c.bf16 ? core::bf16ToFloat(bits) : core::halfToFloat(bits);
        differing += std::memcmp(&got, &hr.output[x], 4) != 0;
      }
      EXPECT_EQ(differing, 0u) << "output values differing from the engine's";
    }
}

TEST(CapiCuda, SameAsEngineInt8Fp8Hopper) {
  REQUIRE_GPU();
  Config c;
  c.causal = true;
  expectSameAsEngine(c, 1);
}

TEST(CapiCuda, SameAsEngineAcrossShapes) {
  REQUIRE_GPU();
  Config cross;  // cross-attention, top-k, 128x64, bf16, sink
  cross.Nq = 300, cross.Nkv = 1500, cross.topk = true, cross.bf16 = true, cross.sink = true;
  cross.geometry = core::kGeometry128x64;
  expectSameAsEngine(cross, 2);
  Config window;  // exact numerics, a window, D 128, B 2
  window.B = 2, window.D = 128, window.window = {200, 50}, window.numerics = core::Numerics::None;
  expectSameAsEngine(window, 3);
  Config fp16;  // int8-fp16 (the mma.sync family), D 256, no GQA
  fp16.Hkv = 4, fp16.D = 256, fp16.Nq = fp16.Nkv = 700, fp16.numerics = core::Numerics::Int8Fp16;
  fp16.geometry = core::kGeometry128x64;
  expectSameAsEngine(fp16, 4);
  Config mixed;  // heads 0 and 2 in exact numerics
  mixed.causal = true, mixed.exact = {1, 0, 1, 0};
  expectSameAsEngine(mixed, 5);
}

TEST(CapiCuda, NhdMatchesHndAndAGraphReplayMatchesARun) {
  REQUIRE_GPU();
  Config c;
  c.causal = true;
  const Inputs in = makeInputs(c, 6);
  const ApiRun hnd = runApi(c, in, problemOf(c));
  // The same tensors in [B, N, H, D]: inputs transposed on the host, the output read back transposed.
  Inputs nhd = in;
  auto transpose = [&](const std::vector<uint16_t>& x, int H, int N) {
    std::vector<uint16_t> t(x.size());
    for (int h = 0; h < H; ++h)
      for (int n = 0; n < N; ++n)
        std::memcpy(&t[(size_t(n) * H + h) * c.D], &x[(size_t(h) * N + n) * c.D], c.D * 2);
    return t;
  };
  nhd.q = transpose(in.q, c.Hq, c.Nq);
  nhd.k = transpose(in.k, c.Hkv, c.Nkv);
  nhd.v = transpose(in.v, c.Hkv, c.Nkv);
  sparge_attn_problem p = problemOf(c);
  p.layout = SPARGE_ATTN_LAYOUT_NHD;
  const ApiRun got = runApi(c, nhd, p);
  EXPECT_EQ(got.mask, hnd.mask);
  std::vector<uint16_t> back(got.o.size());
  for (int n = 0; n < c.Nq; ++n)
    for (int h = 0; h < c.Hq; ++h)
      std::memcpy(&back[(size_t(h) * c.Nq + n) * c.D], &got.o[(size_t(n) * c.Hq + h) * c.D], c.D * 2);
  EXPECT_EQ(back, hnd.o);
}

TEST(CapiCuda, ACapturedGraphReplaysTheCall) {
  REQUIRE_GPU();
  Config c;
  const Inputs in = makeInputs(c, 7);
  const sparge_attn_problem p = problemOf(c);
  sparge_attn_plan* plan = nullptr;
  ASSERT_EQ(sparge_attn_plan_create(&p, &plan), SPARGE_ATTN_OK) << sparge_attn_last_error();
  size_t wsBytes = 0;
  sparge_attn_plan_workspace_size(plan, &wsBytes);
  const size_t oElems = size_t(c.Hq) * c.Nq * c.D;
  DevMem q(in.q.size() * 2), k(in.k.size() * 2), v(in.v.size() * 2), o(oElems * 2), ws(wsBytes);
  cudaMemcpy(q.p, in.q.data(), in.q.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(k.p, in.k.data(), in.k.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(v.p, in.v.data(), in.v.size() * 2, cudaMemcpyHostToDevice);
  ApiParams params(c, headParams(c));
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(sparge_attn_run(plan, q.p, k.p, v.p, o.p, &params.hp, nullptr, ws.p, wsBytes, s), SPARGE_ATTN_OK);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const std::vector<uint16_t> direct = o.get<uint16_t>(oElems);
  cudaMemset(o.p, 0, oElems * 2);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  const sparge_attn_status st =
      sparge_attn_run(plan, q.p, k.p, v.p, o.p, &params.hp, nullptr, ws.p, wsBytes, s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(st, SPARGE_ATTN_OK) << sparge_attn_last_error();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(o.get<uint16_t>(oElems), direct);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  sparge_attn_plan_destroy(plan);
}

// One problem's inputs and output on the device.
struct DevProblem {
  size_t oElems;
  DevMem q, k, v, o;
  DevProblem(const Config& c, const Inputs& in)
      : oElems(size_t(c.B) * c.Hq * c.Nq * c.D),
        q(in.q.size() * 2),
        k(in.k.size() * 2),
        v(in.v.size() * 2),
        o(oElems * 2) {
    cudaMemcpy(q.p, in.q.data(), in.q.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(k.p, in.k.data(), in.k.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(v.p, in.v.data(), in.v.size() * 2, cudaMemcpyHostToDevice);
  }
  sparge_attn_status run(const sparge_attn_plan* plan, const ApiParams& params, void* ws, size_t wsBytes,
                         cudaStream_t s) {
    return sparge_attn_run(plan, q.p, k.p, v.p, o.p, &params.hp, nullptr, ws, wsBytes, s);
  }
};

// A run forks Q's pass and V's quantization onto streams of its own and joins them back: two runs of one plan
// queued back to back on one workspace, without a synchronisation between them, each give what they give
// alone (the second run's side work waits for the first run's Stage 2, which reads the same buffers).
TEST(CapiCuda, BackToBackRunsOnOneWorkspaceKeepTheirOrder) {
  REQUIRE_GPU();
  Config c;
  c.Nq = c.Nkv = 4000;
  c.topk = true;
  const Inputs a = makeInputs(c, 21), b = makeInputs(c, 22);
  const sparge_attn_problem p = problemOf(c);
  const std::vector<uint16_t> aloneA = runApi(c, a, p).o, aloneB = runApi(c, b, p).o;
  sparge_attn_plan* plan = nullptr;
  ASSERT_EQ(sparge_attn_plan_create(&p, &plan), SPARGE_ATTN_OK) << sparge_attn_last_error();
  size_t wsBytes = 0;
  sparge_attn_plan_workspace_size(plan, &wsBytes);
  DevMem ws(wsBytes);
  DevProblem da(c, a), db(c, b);
  ApiParams params(c, headParams(c));
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(da.run(plan, params, ws.p, wsBytes, s), SPARGE_ATTN_OK) << sparge_attn_last_error();
    ASSERT_EQ(db.run(plan, params, ws.p, wsBytes, s), SPARGE_ATTN_OK) << sparge_attn_last_error();
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(da.o.get<uint16_t>(da.oElems), aloneA) << "round " << round;
    EXPECT_EQ(db.o.get<uint16_t>(db.oElems), aloneB) << "round " << round;
  }
  cudaStreamDestroy(s);
  sparge_attn_plan_destroy(plan);
}

// A host thread whose very first run is captured: its side streams and events are made during the capture.
TEST(CapiCuda, AThreadsFirstRunCanBeCaptured) {
  REQUIRE_GPU();
  Config c;
  c.causal = true;
  const Inputs in = makeInputs(c, 23);
  const sparge_attn_problem p = problemOf(c);
  const std::vector<uint16_t> direct = runApi(c, in, p).o;
  std::vector<uint16_t> replayed;
  std::string failure;
  std::thread fresh([&] {
    sparge_attn_plan* plan = nullptr;
    if (sparge_attn_plan_create(&p, &plan) != SPARGE_ATTN_OK) return void(failure = sparge_attn_last_error());
    size_t wsBytes = 0;
    sparge_attn_plan_workspace_size(plan, &wsBytes);
    DevMem ws(wsBytes);
    DevProblem d(c, in);
    ApiParams params(c, headParams(c));
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    const sparge_attn_status st = d.run(plan, params, ws.p, wsBytes, s);
    const std::string message = sparge_attn_last_error();
    const cudaError_t ended = cudaStreamEndCapture(s, &graph);
    if (st != SPARGE_ATTN_OK)
      failure = "run: " + message;
    else if (ended != cudaSuccess)
      failure = std::string("end of capture: ") + cudaGetErrorString(ended);
    else if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
      failure = "graph instantiation";
    else if (cudaGraphLaunch(exec, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess)
      failure = "graph launch";
    else
      replayed = d.o.get<uint16_t>(d.oElems);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    sparge_attn_plan_destroy(plan);
  });
  fresh.join();
  ASSERT_TRUE(failure.empty()) << failure;
  EXPECT_EQ(replayed, direct);
}

TEST(CapiCuda, BadDeviceArgumentsAreRefused) {
  REQUIRE_GPU();
  Config c;
  const sparge_attn_problem p = problemOf(c);
  sparge_attn_plan* plan = nullptr;
  ASSERT_EQ(sparge_attn_plan_create(&p, &plan), SPARGE_ATTN_OK);
  size_t wsBytes = 0;
  sparge_attn_plan_workspace_size(plan, &wsBytes);
  DevMem q(size_t(c.Hq) * c.Nq * c.D * 2), kv(size_t(c.Hkv) * c.Nkv * c.D * 2),
      o(size_t(c.Hq) * c.Nq * c.D * 2), ws(wsBytes);
  ApiParams params(c, headParams(c));
  EXPECT_EQ(sparge_attn_run(plan, q.p, kv.p, kv.p, o.p, &params.hp, nullptr, ws.p, wsBytes - 1, nullptr),
            SPARGE_ATTN_ERROR_WORKSPACE);
  EXPECT_NE(std::string(sparge_attn_last_error()).find("needs"), std::string::npos);
  std::vector<uint16_t> host(size_t(c.Hq) * c.Nq * c.D);
  EXPECT_EQ(sparge_attn_run(plan, host.data(), kv.p, kv.p, o.p, &params.hp, nullptr, ws.p, wsBytes, nullptr),
            SPARGE_ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sparge_attn_last_error()).find("q is not memory of CUDA device"), std::string::npos);
  EXPECT_EQ(sparge_attn_run(plan, static_cast<char*>(q.p) + 2, kv.p, kv.p, o.p, &params.hp, nullptr, ws.p,
                            wsBytes, nullptr),
            SPARGE_ATTN_ERROR_INVALID_ARGUMENT);
  sparge_attn_plan_destroy(plan);
}

}  // namespace
