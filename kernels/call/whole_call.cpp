// WholeCall: the workspace's layout (once per shape) and the launches of one call (whole_call.h).
#include "call/whole_call.h"

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "common/cuda_util.h"
#include "engine/device_stages.h"
#include "sparge/core/error.h"

namespace sparge::cuda {
namespace {

constexpr size_t kAlign = 256;

size_t alignUp(size_t x) {
  return (x + kAlign - 1) / kAlign * kAlign;
}

bool contiguous(const Strides4& s, int H, int N, int D) {
  return s.token == D && s.head == int64_t(N) * D && s.batch == int64_t(H) * N * D;
}

Strides4 hnd(int H, int N, int D) {
  return {int64_t(H) * N * D, int64_t(N) * D, D};
}

}  // namespace

// Device pointers of one call: the inputs as the kernels read them (the caller's, or contiguous copies),
// where Stage 2 writes O, and the workspace's buffers.
struct WholeCall::Ptrs {
  const void *q, *k, *v;
  void* o;
  uint8_t* ws;
  template <typename T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(ws + offset);
  }
};

// The heads of each Stage-2 launch: quantized numerics, exact numerics; each all dense or not, and whether
// any of its heads runs the PV-skip vote.
struct WholeCall::Groups {
  int quantized = 0, exact = 0;
  bool quantizedDense = true, exactDense = true;
  bool quantizedVotes = false, exactVotes = false;
  // Stage 1's self-similarities feed only the selection's s > θ: with every θ below zero only their NaNs
  // count, and the pass may skip the values (SimUse).
  SimUse simUse = SimUse::FlagBelowZero;
};

WholeCall::WholeCall(const CallShape& shape) : shape_(shape) {
  const CallShape& s = shape_;
  p_ = makeProblem(s.B, s.Hq, s.Hkv, s.Nq, s.Nkv, s.D, s.geometry, s.causal, s.window);
  copyQ_ = !contiguous(s.q, s.Hq, s.Nq, s.D);
  copyK_ = !contiguous(s.k, s.Hkv, s.Nkv, s.D);
  copyV_ = !contiguous(s.v, s.Hkv, s.Nkv, s.D);
  copyO_ = !contiguous(s.o, s.Hq, s.Nq, s.D);
  const size_t bhq = size_t(s.B) * s.Hq, bhk = size_t(s.B) * s.Hkv, grid = size_t(p_.nq) * p_.nk;
  const size_t qElems = bhq * s.Nq * s.D, kvElems = bhk * s.Nkv * s.D;
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t here = at;
    at += alignUp(bytes);
    return here;
  };
  at_.upload = take(s.Hq * (sizeof(HeadParamsDev) + 3 * sizeof(int)));
  at_.flags = take(grid);
  at_.km = take(bhk * s.D * 2);
  at_.kmScratch = take(s.smoothK ? bhk * s.D * sizeof(double) : 0);
  at_.q = take(copyQ_ ? qElems * 2 : 0);
  at_.k = take(copyK_ ? kvElems * 2 : 0);
  at_.v = take(copyV_ ? kvElems * 2 : 0);
  at_.o = take(copyO_ ? qElems * 2 : 0);
  at_.pooledQ = take(bhq * p_.nq * s.D * 2);
  at_.pooledK = take(bhk * p_.nk * s.D * 2);
  at_.simQ = take(bhq * p_.nq * sizeof(float));
  at_.simK = take(bhk * p_.nk * sizeof(float));
  at_.scores = take(bhq * grid * 2);
  at_.mask = take(bhq * grid);
  at_.reasons = take(bhq * grid);
  at_.prob = take(bhq * grid * sizeof(float));
  at_.lut = take(bhq * grid * sizeof(int32_t));
  at_.validCount = take(bhq * p_.nq * sizeof(int32_t));
  at_.pvSkipped = take(bhq * grid);
  at_.emptyRows = take(bhq * sizeof(int));
  at_.quant = take(quantWorkspaceBytes(p_, s.numerics));
  total_ = at;
}

WholeCall::Ptrs WholeCall::resolve(const CallArgs& a) const {
  const CallShape& s = shape_;
  Ptrs x{a.q, a.k, a.v, a.o, static_cast<uint8_t*>(a.workspace)};
  auto copyIn = [&](const void*& ptr, size_t slot, const Strides4& from, int H, int N) {
    launchLayoutCopy(ptr, from, x.ws + slot, hnd(H, N, s.D), s.B, H, N, s.D, a.stream);
    ptr = x.ws + slot;
  };
  if (copyQ_) copyIn(x.q, at_.q, s.q, s.Hq, s.Nq);
  if (copyK_) copyIn(x.k, at_.k, s.k, s.Hkv, s.Nkv);
  if (copyV_) copyIn(x.v, at_.v, s.v, s.Hkv, s.Nkv);
  if (copyO_) x.o = x.ws + at_.o;
  return x;
}

namespace {

// Whether head h runs in exact numerics: every head of an unquantized call, or those the caller marked.
bool exactHead(const CallArgs& a, const CallShape& s, int h) {
  return s.numerics == core::Numerics::None || (a.exact && a.exact[h]);
}

// Parameters and head lists (all heads, the quantized group, the exact group), by value.
void uploadRunState(const CallArgs& a, const CallShape& s, uint8_t* dst, int* quantized, int* exact) {
  std::vector<uint8_t> bytes(s.Hq * (sizeof(HeadParamsDev) + 3 * sizeof(int)));
  std::memcpy(bytes.data(), a.params, s.Hq * sizeof(HeadParamsDev));
  int* lists = reinterpret_cast<int*>(bytes.data() + s.Hq * sizeof(HeadParamsDev));
  for (int h = 0; h < s.Hq; ++h) {
    lists[h] = h;
    if (exactHead(a, s, h))
      lists[2 * s.Hq + (*exact)++] = h;
    else
      lists[s.Hq + (*quantized)++] = h;
  }
  launchUpload(dst, bytes.data(), bytes.size(), a.stream);
}

// A PV-skip vote at λ >= kInertVoteLambda (base 2) cannot change what the caller reads. It skips a block only
// when every row's block max lies at least λ below that row's running max, which then stays; so the block's
// P are at most 2^(offset - λ) where the row's largest term of the denominator is 2^offset (offset:
// kFp8POffset in int8-fp8, 0 in exact numerics). At λ >= 40 those P round to zero in e4m3 and in fp16 (they
// lie below 2^-10 and 2^-25), so the block adds nothing to O; in bf16 it adds at most BK · 2^-λ <= 2^-32 of
// the largest |V|. To the row sum it adds at most BK · 2^-λ <= 2^-32 of its value: with every block of a
// 32K-key row skipped the sum moves by under 2^-24 of itself, an fp32 rounding, far below the output's.
// So when no one asked how many blocks the vote skipped (a count that needs it run), it is switched off,
// and a head whose selection keeps every valid block (top-k 1) walks dense; when every head does and no
// mask or LUT is wanted, Stage 1's scores and selection are left out too.
constexpr float kInertVoteLambda = 40.f;

bool wantsSkipCounts(const CallOutputs& out) {
  return out.pvSkipped || out.headStats;
}

HeadParamsDev deployed(HeadParamsDev p, bool skipCountsWanted) {
  if (skipCountsWanted || !(p.lambda >= kInertVoteLambda)) return p;
  p.lambda = INFINITY;
  if (p.mode == 1 && p.topk >= 1.f) p.dense = 1;
  return p;
}

// Two streams beside the caller's, one pair per host thread and device (a plan may run on several threads at
// once, and each thread's events must order its own calls only), made by the thread's first call there. Q's
// pass and V's quantization read nothing the caller's stream writes after the fork (the copies of strided
// inputs come before it), so they run beside K's mean and pass, in the gaps and tails those launches leave
// (which matter most at small shapes: kernels/NOTES.md, "Q's pass and V's quantization beside K's"). The
// selection waits for Q's pass, Stage 2 for V.
struct CallSides {
  SideStream q, v;
};

CallSides& callSides() {
  thread_local std::map<int, CallSides> perDevice;
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return perDevice[device];
}

}  // namespace

void WholeCall::stage1(const CallArgs& a, const Ptrs& x, const Groups& g, QuantOperands* ops) const {
  const CallShape& s = shape_;
  const int bhq = s.B * s.Hq, bhk = s.B * s.Hkv;
  const bool quantize = g.quantized > 0;
  if (quantize) *ops = quantOperandViews(p_, s.numerics, x.ws + at_.quant);
  CallSides& side = callSides();
  side.q.after(a.stream);
  launchBlockPass(s.et, x.q, bhq, s.Nq, s.D, p_.BQ, nullptr, x.ws + at_.pooledQ, x.at<float>(at_.simQ),
                  quantize ? const_cast<int8_t*>(ops->q8) : nullptr, const_cast<float*>(ops->qScale),
                  g.simUse, side.q.get());
  if (quantize) {
    side.v.after(a.stream);
    launchQuantizeV(s.et, p_, s.numerics, x.v, x.ws + at_.quant, *ops, side.v.get());
  }
  const void* km = nullptr;
  if (s.smoothK) {
    launchKeyMean(s.et, x.k, bhk, s.Nkv, s.D, x.at<double>(at_.kmScratch), x.ws + at_.km, a.stream);
    km = x.ws + at_.km;
  }
  launchBlockPass(s.et, x.k, bhk, s.Nkv, s.D, p_.BK, km, x.ws + at_.pooledK, x.at<float>(at_.simK),
                  quantize ? const_cast<int8_t*>(ops->k8) : nullptr, const_cast<float*>(ops->kScale),
                  g.simUse, a.stream);
  side.q.before(a.stream);
  const bool everyHeadDense = g.quantizedDense && g.exactDense;
  const CallOutputs& o = a.out;
  if (!everyHeadDense || o.mask || o.lut || o.lutCount || o.headStats) select(a, x);
  if (quantize) side.v.before(a.stream);
}

// Stage 1's block scores and selection: the mask, the LUT and its counts.
void WholeCall::select(const CallArgs& a, const Ptrs& x) const {
  const CallShape& s = shape_;
  launchScores(s.et, p_, x.ws + at_.pooledQ, x.ws + at_.pooledK, x.ws + at_.scores, a.stream);
  Problem all = p_;
  all.heads = x.at<int>(at_.upload + s.Hq * sizeof(HeadParamsDev));
  all.nHeads = s.Hq;
  SelectArgs sel;
  sel.scores = x.ws + at_.scores;
  sel.selfSimQ = x.at<float>(at_.simQ);
  sel.selfSimK = x.at<float>(at_.simK);
  sel.blocks = x.at<uint8_t>(at_.flags);
  sel.params = x.at<HeadParamsDev>(at_.upload);
  sel.sink = s.sink;
  sel.diagonal = s.diagonal;
  sel.mask = a.out.mask ? a.out.mask : x.at<uint8_t>(at_.mask);
  sel.reasons = x.at<uint8_t>(at_.reasons);
  sel.prob = x.at<float>(at_.prob);
  sel.lut = a.out.lut ? a.out.lut : x.at<int32_t>(at_.lut);
  sel.validCount = a.out.lutCount ? a.out.lutCount : x.at<int32_t>(at_.validCount);
  sel.ctaPerRow = s.switches.selectCtaPerRow;
  launchSelect(s.et, all, sel, a.stream);
}

void WholeCall::stage2(const CallArgs& a, const Ptrs& x, const Groups& g, const QuantOperands& ops) const {
  const CallShape& s = shape_;
  const size_t bhq = size_t(s.B) * s.Hq;
  const bool stats = a.out.headStats != nullptr;
  uint8_t* skipped = a.out.pvSkipped ? a.out.pvSkipped : stats ? x.at<uint8_t>(at_.pvSkipped) : nullptr;
  int* empty = stats ? x.at<int>(at_.emptyRows) : nullptr;
  if (skipped) check(cudaMemsetAsync(skipped, 0, bhq * p_.nq * p_.nk, a.stream), "cudaMemsetAsync(PV skips)");
  if (empty) check(cudaMemsetAsync(empty, 0, bhq * sizeof(int), a.stream), "cudaMemsetAsync(empty rows)");
  AttnArgs base;
  base.q = x.q;
  base.k = x.k;
  base.v = x.v;
  base.o = x.o;
  base.scaleLog2 = float(s.scale * 1.4426950408889634);
  base.lut = a.out.lut ? a.out.lut : x.at<int32_t>(at_.lut);
  base.validCount = a.out.lutCount ? a.out.lutCount : x.at<int32_t>(at_.validCount);
  base.params = x.at<HeadParamsDev>(at_.upload);
  base.pvSkipped = skipped;
  base.emptyRows = empty;
  base.family = s.switches.family;
  base.sm90SplitBelow = s.switches.sm90SplitBelow;
  const int* lists = x.at<int>(at_.upload + s.Hq * sizeof(HeadParamsDev));
  Problem group = p_;
  if (g.quantized) {
    group.heads = lists + s.Hq;
    group.nHeads = g.quantized;
    AttnArgs quantized = base;
    quantized.numerics = s.numerics;
    quantized.quant = ops;
    quantized.votes = g.quantizedVotes;
    launchAttention(s.et, group, quantized, g.quantizedDense, a.stream);
  }
  if (g.exact) {
    group.heads = lists + 2 * s.Hq;
    group.nHeads = g.exact;
    base.votes = g.exactVotes;
    launchAttention(s.et, group, base, g.exactDense, a.stream);
  }
}

void WholeCall::finish(const CallArgs& a, const Ptrs& x) const {
  const CallShape& s = shape_;
  if (copyO_) launchLayoutCopy(x.o, hnd(s.Hq, s.Nq, s.D), a.o, s.o, s.B, s.Hq, s.Nq, s.D, a.stream);
  if (!a.out.headStats) return;
  HeadStatsArgs h;
  h.flags = x.at<uint8_t>(at_.flags);
  h.validCount = a.out.lutCount ? a.out.lutCount : x.at<int32_t>(at_.validCount);
  h.pvSkipped = a.out.pvSkipped ? a.out.pvSkipped : x.at<uint8_t>(at_.pvSkipped);
  h.emptyRows = x.at<int>(at_.emptyRows);
  h.stats = a.out.headStats;
  launchHeadStats(h, s.B * s.Hq, p_.nq, p_.nk, a.stream);
}

void WholeCall::run(const CallArgs& a) const {
  const CallShape& s = shape_;
  if (!a.workspace || reinterpret_cast<uintptr_t>(a.workspace) % kAlign != 0)
    throw Error("whole call", "the workspace must be a 256-byte aligned device buffer");
  std::vector<HeadParamsDev> params(a.params, a.params + s.Hq);
  const bool skipCountsWanted = wantsSkipCounts(a.out);
  for (HeadParamsDev& p : params) p = deployed(p, skipCountsWanted);
  CallArgs d = a;
  d.params = params.data();
  Groups g;
  uploadRunState(d, s, static_cast<uint8_t*>(a.workspace) + at_.upload, &g.quantized, &g.exact);
  for (int h = 0; h < s.Hq; ++h) {
    const bool e = exactHead(a, s, h);
    (e ? g.exactDense : g.quantizedDense) &= params[h].dense != 0;
    (e ? g.exactVotes : g.quantizedVotes) |= !params[h].dense && std::isfinite(params[h].lambda);
    if (!(params[h].theta < 0.0)) g.simUse = SimUse::Value;
  }
  const BlockRule rule{p_.BQ, p_.BK, s.Nq, s.Nkv, s.causal, s.window.left, s.window.right};
  launchBlockFlags(rule, p_.nq, p_.nk, static_cast<uint8_t*>(a.workspace) + at_.flags, a.stream);
  const Ptrs x = resolve(a);
  QuantOperands ops;
  stage1(d, x, g, &ops);
  stage2(d, x, g, ops);
  finish(d, x);
}

}  // namespace sparge::cuda
