// The CPU reference engine: SpargeAttn's method in exact fp32 or emulating the deployed kernels'
// INT8/FP8/fp16 numerics, multi-threaded over heads.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "sparge/core/engine.h"
#include "sparge/core/predictor.h"
#include "sparge/core/stage1.h"

namespace sparge::core {

// Per-head attention output of one Stage-2 pass, shared by the sparse run and the dense reference.
struct AttentionOutput {
  std::vector<float> out;          // [Nq * Dv]
  std::vector<uint8_t> pvSkipped;  // [nq * nk]
  std::vector<float> blockMass;    // [nq * nk] mean attention mass per block (only when asked)
  int64_t emptyRows = 0;
  bool nonFinite = false;  // a visible attention score was NaN or infinite (inputs near the float limits)
  // int8-fp8: V channels that are zero for every token; their FP8 scale is 0 and the output NaN, as
  // upstream's.
  std::vector<int64_t> zeroVChannels;
};

// One head's operands for Stage 2: row-major q [nQ, d], k [nKv, d], v [nKv, dv] holding the stored values.
struct HeadOperands {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t nQ = 0, nKv = 0, d = 0, dv = 0;
  double scale = 1.0;  // softmax scale
  bool causal = false;
  Window window;                 // element masks follow core::visibleKeys
  DType dtype = DType::Float16;  // stored precision: the quantized numerics cast as the deployed kernel does
  const float* keyMean =
      nullptr;  // [d] subtracted from K before its INT8 quantization (smooth_k); may be null
};

// One Stage-2 pass over a head: which key blocks (per query tile), in which numerics, with which PV skip.
struct PassSpec {
  Numerics numerics = Numerics::None;
  const uint8_t* mask = nullptr;                            // [nq * nk], 1 = key block visited
  double lambda = std::numeric_limits<double>::infinity();  // PV-skip threshold; +inf never skips
  bool wantBlockMass = false;  // mean true attention mass per block (exact numerics only)
  // Quantized numerics: the scores as `numerics` computes them (INT8 Q·Kᵀ), but P·V and O in fp32, so that
  // the error of the Q·Kᵀ quantization shows on its own.
  bool exactPv = false;
};

// Block-sparse attention of one (batch, head), as SpargeAttn's Stage 2 computes it (docs/numerics.md): the
// PV skip of docs/method.md, exact element masks (keys past the end and outside core::visibleKeys), and the
// chosen numerics. Several passes run together: every key block is scored once per numerics family and
// shared by the passes that visit it, and a block's P·V is shared by passes whose running maxima agree.
std::vector<AttentionOutput> stage2Passes(const HeadOperands& head, const Geometry& g,
                                          const std::vector<PassSpec>& passes);

// One pass in exact numerics with no window: blockSparseAttention(q, k, v, ...) of the first version.
// λ < 0 is rejected by validate(); pass λ = +inf for no skipping.
AttentionOutput blockSparseAttention(const float* q, const float* k, const float* v, int64_t nQ, int64_t nKv,
                                     int64_t d, int64_t dv, double scale, bool causal, const Geometry& g,
                                     const uint8_t* mask, double lambda, bool wantBlockMass);

// The instruction-set variant of the CPU engine's inner loops in use ("avx512", "avx2" or "x86-64"), the
// variants this CPU runs (best first), and a switch among them for benchmarks (the environment variable
// SPARGE_CPU_ISA picks one at start-up). Throws sparge::Error for a variant this CPU cannot run.
std::string cpuIsa();
std::vector<std::string> cpuIsaVariants();
void useCpuIsa(const std::string& isa);

class CpuEngine final : public Engine {
 public:
  // threads = 0: one per hardware thread; more than core::maxThreads() are capped (parallel.h).
  explicit CpuEngine(int threads = 0);
  ~CpuEngine() override;

  std::string name() const override;
  bool isGpu() const override { return false; }
  void setEntry(std::shared_ptr<const EntryData> entry) override;
  std::shared_ptr<const EntryData> entry() const override { return entry_; }
  EntryResult run(const RunConfig& config, const RunOptions& options) override;

  int threads() const { return threads_; }
  // Whether a run keeps the query tiles whose inputs equal those of the previous run of the same head (the
  // default: same results, a slider move recomputes only the rows whose mask changed). Benchmarks of the
  // engine's raw speed turn it off.
  bool keepTiles() const { return keepTiles_; }
  void setKeepTiles(bool keep) { keepTiles_ = keep; }

 private:
  // Dense outputs cached per head: the exact fp32 reference (with its block mass) and the dense runs in a
  // quantized numerics (the quantization-alone error, and its INT8 Q·Kᵀ part). Both are computed in the first
  // run that needs them, together with that run's sparse passes.
  struct DenseOutput {
    std::vector<float> out;        // [Nq * Dv]
    std::vector<float> blockMass;  // [nq * nk] (reference only)
    bool nonFinite = false;
    ErrorSums vsReference;  // quantized dense run: its error against the reference (errorQuant)
  };
  using ReferenceKey = std::tuple<int64_t, int64_t, int, int>;  // batch, head, geometry
  // ..., numerics, smooth_k, exact P·V (PassSpec::exactPv)
  using QuantDenseKey = std::tuple<int64_t, int64_t, int, int, Numerics, bool, bool>;
  struct HeadWork;   // one (batch, head) of a run: its Stage-2 buffers and outputs, kept from run to run
  struct Workspace;  // every HeadWork, the workers' tile buffers and the tile schedule

  const BlockValidity& blockValidity(const Geometry& g);  // cached per geometry
  const BlockStats& blockStats(int64_t b, int64_t h, const Geometry& g, bool smoothK);
  HeadOperands operands(int64_t b, int64_t h, const BlockStats& stats) const;
  const DenseOutput* cachedReference(const ReferenceKey& key);
  const DenseOutput* cachedQuantDense(const QuantDenseKey& key);
  bool denseCached(const EntryResult& result, const RunOptions& options);
  void runStage1(EntryResult& result, const std::vector<int64_t>& heads, const RunOptions& options);
  // Stage 2 and the error sums of the heads in [first, last), in slots 0.. of the workspace.
  void planPasses(EntryResult& result, int64_t first, int64_t last, const RunOptions& options, bool split);
  void runTiles(int64_t first, int64_t last, const RunOptions& options);
  void compareOutputs(EntryResult& result, int64_t first, int64_t last);
  void collectHeads(EntryResult& result, int64_t first, int64_t last, const RunOptions& options, bool split);
  bool errorsOfDeployed(HeadResult& hr, HeadWork& w, const RunConfig& config);
  void assignWork(const EntryResult& result, int64_t first, int64_t last, int64_t capacity);
  // Every head in groups that fit the workspace: the deployed phase, or (`split`) the exact sparse runs
  // alone.
  void runGroups(EntryResult& result, const RunOptions& options, bool split);
  void finishResult(EntryResult& result) const;
  // Runs task(item, worker) for every item in [0, count) on the engine's threads, in order of the items.
  void spread(int64_t count, const RunOptions& options, const std::function<void(int64_t, int)>& task);

  int threads_;
  bool keepTiles_ = true;  // see keepTiles()
  std::shared_ptr<const EntryData> entry_;
  uint64_t entryCount_ = 0;  // entries set so far: Stage-2 operands are kept for the current one only
  std::mutex runMutex_;      // one run at a time: runs share the workspace
  std::unique_ptr<Workspace> ws_;
  std::mutex cacheMutex_;
  std::map<ReferenceKey, std::unique_ptr<DenseOutput>> references_;
  std::map<QuantDenseKey, std::unique_ptr<DenseOutput>> quantDense_;
  // key: (batch, head, blockQ, blockK, smoothK)
  std::map<std::tuple<int64_t, int64_t, int, int, bool>, std::unique_ptr<BlockStats>> stats_;
  // key: (blockQ, blockK)
  std::map<std::pair<int, int>, std::unique_ptr<BlockValidity>> validity_;
  PredictorCache methodStats_;  // the statistics of the methods other than SpargeAttn
};

}  // namespace sparge::core
