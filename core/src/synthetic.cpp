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

// K channel 0 of KV head hk becomes ±outlierValue and Q channel 0 of its query heads 0 (see SynthSpec). The
// signs come from their own generator, so the other values are those of a capture without outliers.
void plantOutliers(EntryData& e, const SynthSpec& s, int64_t b, int64_t hk) {
  std::mt19937_64 signs(s.seed * 0x9E3779B97F4A7C15ull + uint64_t(b * s.headsKV + hk));
  const int64_t d = s.headDim, group = s.headsQ / s.headsKV;
  const int64_t nQ = e.info.tokensQ, nKv = e.info.tokensKV;
  float* k = e.k.data() + ((b * s.headsKV + hk) * nKv) * d;
  for (int64_t t = 0; t < nKv; ++t)
    k[t * d] = roundTo(float((signs() & 1) ? s.outlierValue : -s.outlierValue), s.dtype);
  for (int64_t hq = hk * group; hq < (hk + 1) * group; ++hq) {
    float* q = e.q.data() + ((b * s.headsQ + hq) * nQ) * d;
    for (int64_t t = 0; t < nQ; ++t) q[t * d] = 0.0f;
  }
}

// Random Fourier features of an RBF kernel over (t, h, w): φ(p) = √(2/d) · cos(Ω p + β) with Ω's rows drawn
// from N(0, diag(1/ℓt², 1/ℓ², 1/ℓ²)), so that φ(p)·φ(p') ≈ exp(−|Δt|²/2ℓt² − |Δh, Δw|²/2ℓ²): Q and K built
// from φ give logits that fall with the distance on the grid, smooth in the position.
class GridFeatures {
 public:
  GridFeatures(Normal& n, int64_t d, double ls, double lsT) : d_(d), omega_(size_t(d) * 3), beta_(size_t(d)) {
    for (int64_t c = 0; c < d; ++c) {
      omega_[size_t(c) * 3 + 0] = n.next() / lsT;
      omega_[size_t(c) * 3 + 1] = n.next() / ls;
      omega_[size_t(c) * 3 + 2] = n.next() / ls;
      beta_[size_t(c)] = 2.0 * M_PI * (n.next() * 0.5 + 0.5);
    }
  }
  double at(int64_t c, int64_t t, int64_t h, int64_t w) const {
    const double* o = &omega_[size_t(c) * 3];
    return std::sqrt(2.0 / double(d_)) *
           std::cos(o[0] * double(t) + o[1] * double(h) + o[2] * double(w) + beta_[size_t(c)]);
  }

 private:
  int64_t d_;
  std::vector<double> omega_, beta_;
};

}  // namespace

EntryInfo syntheticEntryInfo(const SynthSpec& s) {
  EntryInfo info;
  info.name = s.name;
  info.batch = s.batch;
  info.headsQ = s.headsQ;
  info.headsKV = s.headsKV;
  info.tokensQ = s.grid ? s.grid->offset + s.grid->count() : s.tokensQ;
  info.tokensKV = s.grid ? info.tokensQ : s.tokensKV;
  info.headDim = s.headDim;
  info.headDimV = s.headDimV;
  info.dtype = s.dtype;
  info.layout = s.layout;
  info.causal = s.causal;
  info.scale = 1.0 / std::sqrt(double(s.headDim));
  info.grid = s.grid;
  return info;
}

namespace {

// One (batch, KV head) of a grid entry: K and V, and Q of the query heads that share them. Head h scales the
// smooth part by its own amplitude (diffuse to sharp heads); prompt tokens are random.
void fillGridHead(EntryData& e, const SynthSpec& s, Normal& n, int64_t b, int64_t hk) {
  const EntryInfo& in = e.info;
  const TokenGrid& g = *s.grid;
  const int64_t d = s.headDim, dv = s.headDimV, group = s.headsQ / s.headsKV;
  const GridFeatures phi(n, d, s.lengthScale, s.frameLengthScale);
  const double noise = s.noise / std::sqrt(double(d));
  auto value = [&](int64_t token, int64_t c, double amp) {
    const int64_t i = token - g.offset;
    if (i < 0) return amp * n.next() / std::sqrt(double(d));  // a prompt token
    const double smooth = phi.at(c, i / (g.height * g.width), (i / g.width) % g.height, i % g.width);
    return amp * (smooth + noise * n.next());
  };
  const double kAmp = std::sqrt(std::sqrt(double(d)) * 6.0 * s.sharpness);
  float* k = e.k.data() + ((b * s.headsKV + hk) * in.tokensKV) * d;
  float* v = e.v.data() + ((b * s.headsKV + hk) * in.tokensKV) * dv;
  for (int64_t t = 0; t < in.tokensKV; ++t) {
    for (int64_t c = 0; c < d; ++c) k[t * d + c] = roundTo(float(value(t, c, kAmp)), s.dtype);
    for (int64_t c = 0; c < dv; ++c) v[t * dv + c] = roundTo(float(n.next()), s.dtype);
  }
  for (int64_t j = 0; j < group; ++j) {
    const int64_t hq = hk * group + j;
    const double frac = s.headsQ > 1 ? double(hq) / double(s.headsQ - 1) : 1.0;
    const double amp = std::sqrt(std::sqrt(double(d)) * 6.0 * s.sharpness * (0.3 + 0.7 * frac));
    float* q = e.q.data() + ((b * s.headsQ + hq) * in.tokensQ) * d;
    for (int64_t t = 0; t < in.tokensQ; ++t)
      for (int64_t c = 0; c < d; ++c) q[t * d + c] = roundTo(float(value(t, c, amp)), s.dtype);
  }
}

}  // namespace

SynthProblem synthSpecProblem(const SynthSpec& s) {
  const EntryInfo info = syntheticEntryInfo(s);
  if (const EntryInfo::ShapeProblem p = info.shapeProblem(); !p.dimension.empty())
    return {p.dimension, p.problem};
  if (s.headsQ % s.headsKV != 0)
    return {"kv-heads", "query heads (" + std::to_string(s.headsQ) + ") must be a multiple of KV heads (" +
                            std::to_string(s.headsKV) + ")"};
  for (int64_t h : s.outlierKvHeads)
    if (h < 0 || h >= s.headsKV)
      return {"outlier-heads",
              "KV head " + std::to_string(h) + " out of range [0, " + std::to_string(s.headsKV) + ")"};
  if (!std::isfinite(s.outlierValue) || std::fabs(s.outlierValue) > 60000)
    return {"outlier-value", "must be a finite number of magnitude <= 60000 (float16 range)"};
  if (s.grid && s.causal) return {"causal", "a grid entry is bidirectional: drop --causal"};
  if (s.grid)
    if (std::string p = gridProblem(*s.grid, info.tokensQ, info.tokensKV); !p.empty()) return {"grid", p};
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
  const EntryInfo info = syntheticEntryInfo(s);
  const double b = double(s.batch);
  const double data = 4.0 * b *
                      (double(s.headsQ) * double(info.tokensQ) * double(s.headDim) +
                       double(s.headsKV) * double(info.tokensKV) * double(s.headDim + s.headDimV));
  // One KV head's topic directions at a time: a vector of head-dim doubles per segment.
  const double segments =
      double(ceilDiv(std::max(info.tokensQ, info.tokensKV), std::max<int64_t>(1, s.segment)));
  return data + segments * (8.0 * double(s.headDim) + 32.0);
}

EntryData makeSyntheticEntry(const SynthSpec& s) {
  if (const SynthProblem p = synthSpecProblem(s); !p.field.empty())
    throw Error("synthetic capture: " + p.field, p.problem);
  EntryData e;
  e.info = syntheticEntryInfo(s);
  // synthSpecProblem keeps every tensor within kMaxTensorValues: these products cannot overflow.
  const EntryInfo& info = e.info;
  e.q.resize(size_t(s.batch * s.headsQ * info.tokensQ * s.headDim));
  e.k.resize(size_t(s.batch * s.headsKV * info.tokensKV * s.headDim));
  e.v.resize(size_t(s.batch * s.headsKV * info.tokensKV * s.headDimV));
  const int64_t d = s.headDim;
  Normal n(s.seed);
  auto outliers = [&](int64_t b, int64_t hk) {
    if (std::find(s.outlierKvHeads.begin(), s.outlierKvHeads.end(), hk) != s.outlierKvHeads.end())
      plantOutliers(e, s, b, hk);
  };
  if (s.grid) {
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t hk = 0; hk < s.headsKV; ++hk) {
        fillGridHead(e, s, n, b, hk);
        outliers(b, hk);
      }
    return e;
  }
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
      outliers(b, hk);
    }
  return e;
}

}  // namespace sparge::core
