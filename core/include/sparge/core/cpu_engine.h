// The CPU reference engine: exact SpargeAttn semantics in fp32, multi-threaded over heads.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "sparge/core/engine.h"
#include "sparge/core/stage1.h"

namespace sparge::core {

// Per-head attention output of one Stage-2 pass, shared by the sparse run and the dense reference.
struct AttentionOutput {
  std::vector<float> out;          // [Nq * Dv]
  std::vector<uint8_t> pvSkipped;  // [nq * nk]
  std::vector<float> blockMass;    // [nq * nk] mean attention mass per block (only when asked)
  int64_t emptyRows = 0;
};

// Block-sparse attention of one (batch, head) in fp32 with the PV skip of SPARGE_SPEC.md §4.4 and
// exact element-level causal masking (top-left). `mask` [nq * nk] selects key blocks per query tile;
// λ < 0 is rejected by validate(); pass λ = +inf for no skipping. `wantBlockMass` computes the mean
// true attention mass per block (used for the dense reference).
AttentionOutput blockSparseAttention(const float* q, const float* k, const float* v, int64_t nQ, int64_t nKv,
                                     int64_t d, int64_t dv, double scale, bool causal, const Geometry& g,
                                     const uint8_t* mask, double lambda, bool wantBlockMass);

class CpuEngine final : public Engine {
 public:
  // threads = 0: std::thread::hardware_concurrency().
  explicit CpuEngine(int threads = 0);
  ~CpuEngine() override;

  std::string name() const override;
  bool isGpu() const override { return false; }
  void setEntry(std::shared_ptr<const EntryData> entry) override;
  std::shared_ptr<const EntryData> entry() const override { return entry_; }
  EntryResult run(const RunConfig& config, const RunOptions& options) override;

  int threads() const { return threads_; }

 private:
  struct Reference {
    std::vector<float> out;        // [Nq * Dv]
    std::vector<float> blockMass;  // [nq * nk]
  };
  const Reference& reference(int64_t b, int64_t h, const Geometry& g, double* msSpent);
  const BlockValidity& blockValidity(const Geometry& g);  // cached per geometry
  const BlockStats& blockStats(int64_t b, int64_t h, const Geometry& g, bool smoothK, double* msSpent);

  int threads_;
  std::shared_ptr<const EntryData> entry_;
  std::mutex cacheMutex_;
  // key: (batch, head, blockQ, blockK)
  std::map<std::tuple<int64_t, int64_t, int, int>, std::unique_ptr<Reference>> references_;
  // key: (batch, head, blockQ, blockK, smoothK)
  std::map<std::tuple<int64_t, int64_t, int, int, bool>, std::unique_ptr<BlockStats>> stats_;
  // key: (blockQ, blockK)
  std::map<std::pair<int, int>, std::unique_ptr<BlockValidity>> validity_;
};

}  // namespace sparge::core
