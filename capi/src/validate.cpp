// Validation of a problem and of a run's per-head parameters: every bad value is refused with a message that
// names the field, the value and what would be accepted.
#include <cmath>
#include <cstring>
#include <limits>

#include "call.h"

namespace sparge::capi {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw Failure(SPARGE_ATTN_ERROR_INVALID_ARGUMENT, message);
}

void requirePositive(int64_t value, const char* field) {
  if (value < 1) invalid(std::string("problem.") + field + " must be >= 1; got " + std::to_string(value));
}

// The strides of a tensor, from the layout or the caller's (STRIDED).
Strides stridesOf(const sparge_attn_problem& p, const sparge_attn_strides& given, int heads, int tokens,
                  const char* name) {
  const int64_t d = p.head_dim;
  switch (p.layout) {
    case SPARGE_ATTN_LAYOUT_HND:
      return Resolved::hnd(heads, tokens, int(d));
    case SPARGE_ATTN_LAYOUT_NHD:
      return {int64_t(tokens) * heads * d, d, int64_t(heads) * d};
    case SPARGE_ATTN_LAYOUT_STRIDED:
      break;
    default:
      invalid("problem.layout must be SPARGE_ATTN_LAYOUT_HND, _NHD or _STRIDED; got " +
              std::to_string(int(p.layout)));
  }
  const Strides s{given.batch, given.head, given.token};
  // Vector loads read 8 elements (16 bytes) at a time, so every row starts on a 16-byte boundary.
  for (int64_t x : {s.batch, s.head, s.token})
    if (x < 0 || x % 8 != 0)
      invalid(std::string("problem.") + name +
              "_strides: every stride must be a non-negative multiple of 8 "
              "elements (16-byte rows); got batch " +
              std::to_string(s.batch) + ", head " + std::to_string(s.head) + ", token " +
              std::to_string(s.token));
  if (s.token < d)
    invalid(std::string("problem.") + name + "_strides.token (" + std::to_string(s.token) +
            ") is smaller than the head dim " + std::to_string(d) + ": rows would overlap");
  return s;
}

core::Geometry resolveGeometry(const sparge_attn_problem& p, sparge_attn_backend backend, int device) {
  if (p.block_q == 0 && p.block_k == 0)
    return backend == SPARGE_ATTN_BACKEND_CUDA ? defaultCudaGeometry(device) : core::kGeometry128x64;
  const core::Geometry g{p.block_q, p.block_k};
  if (!(g == core::kGeometry128x64 || g == core::kGeometry64x128))
    invalid("problem.block_q x block_k must be 128x64 or 64x128 (or 0, 0 for the device's default); got " +
            std::to_string(p.block_q) + "x" + std::to_string(p.block_k));
  return g;
}

core::Numerics resolveNumerics(sparge_attn_numerics n) {
  switch (n) {
    case SPARGE_ATTN_NUMERICS_INT8_FP8:
      return core::Numerics::Int8Fp8;
    case SPARGE_ATTN_NUMERICS_INT8_FP16:
      return core::Numerics::Int8Fp16;
    case SPARGE_ATTN_NUMERICS_NONE:
      return core::Numerics::None;
  }
  invalid("problem.numerics must be SPARGE_ATTN_NUMERICS_INT8_FP8, _INT8_FP16 or _NONE; got " +
          std::to_string(int(n)));
}

core::Window resolveWindow(const sparge_attn_problem& p) {
  for (int64_t x : {p.window_left, p.window_right})
    if (x < -1)
      invalid("problem.window_left / window_right must be >= 0, or -1 for unbounded; got [" +
              std::to_string(p.window_left) + ", " + std::to_string(p.window_right) + "]");
  return core::Window{p.window_left, p.window_right};
}

sparge_attn_backend resolveBackend(sparge_attn_backend b) {
  switch (b) {
    case SPARGE_ATTN_BACKEND_AUTO:
      return cudaDeviceCount() > 0 ? SPARGE_ATTN_BACKEND_CUDA : SPARGE_ATTN_BACKEND_CPU;
    case SPARGE_ATTN_BACKEND_CUDA:
    case SPARGE_ATTN_BACKEND_CPU:
      return b;
  }
  invalid("problem.backend must be SPARGE_ATTN_BACKEND_AUTO, _CUDA or _CPU; got " + std::to_string(int(b)));
}

void checkShape(const sparge_attn_problem& p) {
  requirePositive(p.batch, "batch");
  requirePositive(p.heads_q, "heads_q");
  requirePositive(p.heads_kv, "heads_kv");
  requirePositive(p.tokens_q, "tokens_q");
  requirePositive(p.tokens_kv, "tokens_kv");
  if (p.heads_q % p.heads_kv != 0)
    invalid("problem.heads_q (" + std::to_string(p.heads_q) + ") must be a multiple of heads_kv (" +
            std::to_string(p.heads_kv) + ")");
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256)
    throw Failure(SPARGE_ATTN_ERROR_UNSUPPORTED,
                  "problem.head_dim " + std::to_string(p.head_dim) + " is not supported: 64, 128 or 256");
  if (p.dtype != SPARGE_ATTN_FLOAT16 && p.dtype != SPARGE_ATTN_BFLOAT16)
    invalid("problem.dtype must be SPARGE_ATTN_FLOAT16 or SPARGE_ATTN_BFLOAT16; got " +
            std::to_string(int(p.dtype)));
  // The kernels index tokens with 32-bit integers (times a few hundred at most).
  const int64_t maxTokens = std::numeric_limits<int>::max() / 512;
  if (p.tokens_q > maxTokens || p.tokens_kv > maxTokens)
    throw Failure(SPARGE_ATTN_ERROR_UNSUPPORTED,
                  "problem.tokens_q / tokens_kv above " + std::to_string(maxTokens) + " are not supported");
  if (!(p.scale >= 0) || !std::isfinite(p.scale))
    invalid("problem.scale must be a finite number > 0 (or 0 for 1/sqrt(head_dim)); got " +
            std::to_string(p.scale));
  if (p.cpu_threads < 0) invalid("problem.cpu_threads must be >= 0; got " + std::to_string(p.cpu_threads));
}

}  // namespace

void readStruct(const void* in, uint32_t callerSize, size_t minSize, void* out, size_t ourSize,
                const char* what) {
  if (callerSize < minSize)
    invalid(std::string(what) + ".struct_size is " + std::to_string(callerSize) + ", below the " +
            std::to_string(minSize) + " bytes of its first version: set it to sizeof(" + what + ")");
  const auto* bytes = static_cast<const unsigned char*>(in);
  for (size_t i = ourSize; i < callerSize; ++i)
    if (bytes[i] != 0)
      throw Failure(SPARGE_ATTN_ERROR_VERSION,
                    std::string(what) + " comes from a newer header and sets fields this library (" +
                        sparge_attn_version_string() + ") does not know; update libsparge_attn");
  std::memcpy(out, in, std::min<size_t>(callerSize, ourSize));
  static_cast<uint32_t*>(out)[0] = uint32_t(ourSize);
}

Resolved resolveProblem(const sparge_attn_problem& p) {
  checkShape(p);
  Resolved r;
  r.B = p.batch;
  r.Hq = p.heads_q;
  r.Hkv = p.heads_kv;
  r.Nq = p.tokens_q;
  r.Nkv = p.tokens_kv;
  r.D = p.head_dim;
  r.dtype = p.dtype == SPARGE_ATTN_BFLOAT16 ? core::DType::BFloat16 : core::DType::Float16;
  r.numerics = resolveNumerics(p.numerics);
  r.backend = resolveBackend(p.backend);
  if (r.backend == SPARGE_ATTN_BACKEND_CUDA) r.device = resolveCudaDevice(p.device);
  r.geometry = resolveGeometry(p, r.backend, r.device);
  r.causal = p.causal != 0;
  r.window = resolveWindow(p);
  r.scale = p.scale > 0 ? p.scale : 1.0 / std::sqrt(double(p.head_dim));
  r.smoothK = p.smooth_k != 0;
  r.sink = p.attention_sink != 0;
  r.diagonal = p.diagonal != 0;
  r.cpuThreads = p.cpu_threads;
  r.q = stridesOf(p, p.q_strides, r.Hq, r.Nq, "q");
  r.k = stridesOf(p, p.k_strides, r.Hkv, r.Nkv, "k");
  r.v = stridesOf(p, p.v_strides, r.Hkv, r.Nkv, "v");
  r.o = stridesOf(p, p.o_strides, r.Hq, r.Nq, "o");
  r.nq = int(core::ceilDiv(r.Nq, r.geometry.blockQ));
  r.nk = int(core::ceilDiv(r.Nkv, r.geometry.blockK));
  return r;
}

bool RunHeads::anyExact() const {
  for (uint8_t e : exact)
    if (e) return true;
  return false;
}

bool RunHeads::anyQuantized() const {
  for (uint8_t e : exact)
    if (!e) return true;
  return false;
}

RunHeads resolveHeads(const Resolved& r, const sparge_attn_head_params* given) {
  if (!given) invalid("params is null: the per-head parameters (θ and τ or top-k) are required");
  sparge_attn_head_params hp{};
  readStruct(given, given->struct_size, offsetof(sparge_attn_head_params, exact) + sizeof(hp.exact), &hp,
             sizeof(hp), "sparge_attn_head_params");
  if (hp.heads != r.Hq)
    invalid("params.heads is " + std::to_string(hp.heads) + " but the problem has " + std::to_string(r.Hq) +
            " query heads: give one value per query head");
  if (hp.select != SPARGE_ATTN_SELECT_CDF && hp.select != SPARGE_ATTN_SELECT_TOPK)
    invalid("params.select must be SPARGE_ATTN_SELECT_CDF or _TOPK; got " + std::to_string(int(hp.select)));
  const bool topk = hp.select == SPARGE_ATTN_SELECT_TOPK;
  if (!hp.simthreshd1) invalid("params.simthreshd1 (θ) is null: it is required");
  if (topk && !hp.topk) invalid("params.topk is null, but params.select is SPARGE_ATTN_SELECT_TOPK");
  if (!topk && !hp.cdfthreshd)
    invalid("params.cdfthreshd (τ) is null, but params.select is SPARGE_ATTN_SELECT_CDF");
  RunHeads out;
  out.params.resize(size_t(r.Hq));
  out.exact.assign(size_t(r.Hq), 0);
  for (int h = 0; h < r.Hq; ++h) {
    core::HeadParams& x = out.params[size_t(h)];
    x.theta = hp.simthreshd1[h];
    x.mode = topk ? core::SelectMode::TopK : core::SelectMode::Cdf;
    if (topk)
      x.topk = hp.topk[h];
    else
      x.tau = hp.cdfthreshd[h];
    x.lambda = hp.pvthreshd ? hp.pvthreshd[h] : 50.0;
    x.dense = hp.dense && hp.dense[h];
    if (hp.exact && hp.exact[h]) out.exact[size_t(h)] = 1;
    try {
      core::validate(x, "params, head " + std::to_string(h));
    } catch (const std::exception& e) {
      invalid(e.what());
    }
  }
  return out;
}

}  // namespace sparge::capi
