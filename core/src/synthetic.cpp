// Synthetic entries: keys of each segment share a random "topic" direction and queries point at the
// topic of their own segment, so attention concentrates on block-diagonal bands (plus a sink). The
// sharpness varies by head, from diffuse heads to very sparse ones.
#include "sparge/core/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "sparge/core/error.h"
#include "sparge/core/half.h"

namespace sparge::core {
namespace {

// Box-Muller on top of mt19937_64, so the values are identical on every standard library.
class Normal {
 public:
  explicit Normal(uint64_t seed) : rng_(seed) {}
  double next() {
    if (hasSpare_) {
      hasSpare_ = false;
      return spare_;
    }
    double u1 = (double(rng_() >> 11) + 0.5) * 0x1p-53, u2 = double(rng_() >> 11) * 0x1p-53;
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * M_PI * u2;
    spare_ = r * std::sin(a);
    hasSpare_ = true;
    return r * std::cos(a);
  }

 private:
  std::mt19937_64 rng_;
  double spare_ = 0;
  bool hasSpare_ = false;
};

float roundTo(float x, DType t) {
  switch (t) {
    case DType::Float16:
      return roundToHalf(x);
    case DType::BFloat16:
      return roundToBf16(x);
    default:
      return x;
  }
}

std::vector<double> unitVector(Normal& n, int64_t d) {
  std::vector<double> v(d);
  double norm = 0;
  for (auto& x : v) {
    x = n.next();
    norm += x * x;
  }
  for (auto& x : v) x /= std::sqrt(norm);
  return v;
}

}  // namespace

EntryInfo syntheticEntryInfo(const SynthSpec& s) {
  EntryInfo info;
  info.name = s.name;
  info.batch = s.batch;
  info.headsQ = s.headsQ;
  info.headsKV = s.headsKV;
  info.tokensQ = s.tokensQ;
  info.tokensKV = s.tokensKV;
  info.headDim = s.headDim;
  info.headDimV = s.headDimV;
  info.dtype = s.dtype;
  info.layout = s.layout;
  info.causal = s.causal;
  info.scale = 1.0 / std::sqrt(double(s.headDim));
  return info;
}

SynthProblem synthSpecProblem(const SynthSpec& s) {
  const EntryInfo info = syntheticEntryInfo(s);
  if (const EntryInfo::ShapeProblem p = info.shapeProblem(); !p.dimension.empty())
    return {p.dimension, p.problem};
  if (s.headsQ % s.headsKV != 0)
    return {"kv-heads", "query heads (" + std::to_string(s.headsQ) + ") must be a multiple of KV heads (" +
                            std::to_string(s.headsKV) + ")"};
  if (s.segment < 1) return {"segment", std::to_string(s.segment) + " tokens: a segment holds at least 1"};
  // Beyond it the largest values overflow float16 (and NaN or a negative one would make every value NaN).
  if (!(s.sharpness >= 0 && s.sharpness <= kMaxSharpness)) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", s.sharpness);
    return {"sharpness", std::string(text) + " is outside [0, " + std::to_string(int(kMaxSharpness)) +
                             "] — larger values overflow float16, negative ones give NaN"};
  }
  return {};
}

double syntheticEntryBytes(const SynthSpec& s) {
  const double b = double(s.batch);
  const double data = 4.0 * b *
                      (double(s.headsQ) * double(s.tokensQ) * double(s.headDim) +
                       double(s.headsKV) * double(s.tokensKV) * double(s.headDim + s.headDimV));
  // One KV head's topic directions at a time: a vector of head-dim doubles per segment.
  const double segments = double(ceilDiv(std::max(s.tokensQ, s.tokensKV), std::max<int64_t>(1, s.segment)));
  return data + segments * (8.0 * double(s.headDim) + 32.0);
}

EntryData makeSyntheticEntry(const SynthSpec& s) {
  if (const SynthProblem p = synthSpecProblem(s); !p.field.empty())
    throw Error("synthetic capture: " + p.field, p.problem);
  EntryData e;
  e.info = syntheticEntryInfo(s);
  // synthSpecProblem keeps every tensor within kMaxTensorValues: these products cannot overflow.
  e.q.resize(size_t(s.batch * s.headsQ * s.tokensQ * s.headDim));
  e.k.resize(size_t(s.batch * s.headsKV * s.tokensKV * s.headDim));
  e.v.resize(size_t(s.batch * s.headsKV * s.tokensKV * s.headDimV));
  const int64_t d = s.headDim;
  Normal n(s.seed);
  const int64_t segments = ceilDiv(std::max(s.tokensQ, s.tokensKV), s.segment);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t hk = 0; hk < s.headsKV; ++hk) {
      std::vector<std::vector<double>> topics;
      for (int64_t t = 0; t < segments; ++t) topics.push_back(unitVector(n, d));
      const std::vector<double> sinkDir = unitVector(n, d);
      for (int64_t g = 0; g < s.headsQ / s.headsKV; ++g) {
        const int64_t hq = hk * (s.headsQ / s.headsKV) + g;
        const double frac = s.headsQ > 1 ? double(hq) / double(s.headsQ - 1) : 1.0;
        // Logit gap between the own topic and others is about amp² · scale.
        const double amp = std::sqrt(std::sqrt(double(d)) * 6.0 * s.sharpness * (0.3 + 0.7 * frac));
        float* q = e.q.data() + ((b * s.headsQ + hq) * s.tokensQ) * d;
        for (int64_t t = 0; t < s.tokensQ; ++t)
          for (int64_t c = 0; c < d; ++c)
            q[t * d + c] = roundTo(
                float(amp * topics[t / s.segment][c] + 0.5 * amp * sinkDir[c] + 0.25 * n.next()), s.dtype);
      }
      const double kAmp = std::sqrt(std::sqrt(double(d)) * 6.0 * s.sharpness);
      float* k = e.k.data() + ((b * s.headsKV + hk) * s.tokensKV) * d;
      float* v = e.v.data() + ((b * s.headsKV + hk) * s.tokensKV) * s.headDimV;
      for (int64_t t = 0; t < s.tokensKV; ++t) {
        const bool sink = t < s.sinkTokens;
        for (int64_t c = 0; c < d; ++c)
          k[t * d + c] = roundTo(
              float((sink ? kAmp * sinkDir[c] : kAmp * topics[t / s.segment][c]) + 0.25 * n.next()), s.dtype);
        for (int64_t c = 0; c < s.headDimV; ++c) v[t * s.headDimV + c] = roundTo(float(n.next()), s.dtype);
      }
    }
  return e;
}

}  // namespace sparge::core
