// Host oracles for the attention kernel tests (see attention_oracle.h).
#include "attention_oracle.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sparge/core/half.h"

namespace sparge::cuda::oracle {
namespace {

// The 127 non-negative finite e4m3 values in increasing order (bit pattern = index).
const std::vector<float>& e4m3Table() {
  static const std::vector<float> table = [] {
    std::vector<float> t;
    for (int bits = 0; bits < 127; ++bits) t.push_back(e4m3Value(uint8_t(bits)));
    return t;
  }();
  return table;
}

float roundHalf(float x) {
  return core::halfToFloat(core::floatToHalf(x));
}

}  // namespace

KeyRange visibleKeys(int q, int nkv, bool causal, const core::Window& w) {
  KeyRange r{0, nkv - 1};
  const int64_t right = causal ? 0 : w.right;
  if (right >= 0) r.last = int(std::min<int64_t>(r.last, q + right));
  if (w.left >= 0) r.first = int(std::max<int64_t>(0, q - w.left));
  return r;
}

float e4m3Value(uint8_t bits) {
  const int sign = bits >> 7, e = (bits >> 3) & 15, m = bits & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.f + m / 8.f, e - 7);
  return sign ? -mag : mag;
}

uint8_t e4m3Bits(float x) {
  if (std::isnan(x)) return 0x7f;
  const std::vector<float>& t = e4m3Table();
  const float a = std::fabs(x);
  int best = 0;
  if (a >= t.back()) {
    best = 126;  // satfinite
  } else {
    const int hi = int(std::upper_bound(t.begin(), t.end(), a) - t.begin());  // t[hi-1] <= a < t[hi]
    const int lo = hi - 1;
    const float dl = a - t[lo], dh = t[hi] - a;
    best = dl < dh ? lo : dh < dl ? hi : ((lo & 1) == 0 ? lo : hi);  // tie: even mantissa
  }
  return uint8_t(best | (std::signbit(x) ? 0x80 : 0));
}

float e4m3Round(float x) {
  return std::isnan(x) ? x : e4m3Value(e4m3Bits(x));
}

float roundElem(float x, bool bf16) {
  return bf16 ? core::bf16ToFloat(core::floatToBf16(x)) : roundHalf(x);
}

Int8Tile quantizeTile(const float* x, int rows, int d) {
  Int8Tile t;
  float amax = 0;
  for (int i = 0; i < rows * d; ++i) amax = std::max(amax, std::fabs(x[i]));
  t.scale = amax / 127.f + 1e-7f;
  t.q.resize(size_t(rows) * d);
  for (int i = 0; i < rows * d; ++i) {
    const float v = x[i] / t.scale;
    t.q[i] = int8_t(std::trunc(v + (v >= 0.f ? 0.5f : -0.5f)));
  }
  return t;
}

std::vector<float> smoothK(const HeadData& h) {
  std::vector<float> k = h.k;
  if (h.km.empty()) return k;
  for (int t = 0; t < h.nkv; ++t)
    for (int c = 0; c < h.d; ++c)
      k[size_t(t) * h.d + c] = roundElem(k[size_t(t) * h.d + c] - h.km[c], h.bf16);
  return k;
}

void quantizeV(const HeadData& h, std::vector<float>& v8, std::vector<float>& scale) {
  v8.assign(h.v.size(), 0.f);
  scale.assign(h.d, 0.f);
  for (int c = 0; c < h.d; ++c) {
    float amax = 0;
    for (int t = 0; t < h.nkv; ++t) amax = std::max(amax, std::fabs(roundHalf(h.v[size_t(t) * h.d + c])));
    const float recp = amax > 0 ? 2.25f / amax : 0.f;
    scale[c] = amax / 2.25f;
    for (int t = 0; t < h.nkv; ++t)
      v8[size_t(t) * h.d + c] = e4m3Round(roundHalf(h.v[size_t(t) * h.d + c]) * recp);
  }
}

namespace {

// Operands as the numerics sees them: scores = dot(qs[row], ks[key]) · qScale[tile] · kScale[block].
struct Operands {
  std::vector<float> q, k, v;  // INT8 values (as floats) or input values
  std::vector<float> qScale, kScale, vScale;
};

Operands prepare(const HeadData& h, core::Numerics n, int bq, int bk) {
  Operands o;
  if (n == core::Numerics::None) {
    o.q = h.q;
    o.k = h.k;
    o.v = h.v;
    return o;
  }
  auto tiles = [&](const std::vector<float>& x, int rows, int b, std::vector<float>& out,
                   std::vector<float>& sc) {
    const int nt = (rows + b - 1) / b;
    out.assign(size_t(nt) * b * h.d, 0.f);
    for (int i = 0; i < nt; ++i) {
      std::vector<float> tile(size_t(b) * h.d, 0.f);
      const int r = std::min(b, rows - i * b);
      std::copy(x.begin() + size_t(i) * b * h.d, x.begin() + (size_t(i) * b + r) * h.d, tile.begin());
      Int8Tile t = quantizeTile(tile.data(), b, h.d);
      sc.push_back(t.scale);
      for (size_t e = 0; e < t.q.size(); ++e) out[size_t(i) * b * h.d + e] = t.q[e];
    }
  };
  tiles(h.q, h.nq, bq, o.q, o.qScale);
  tiles(smoothK(h), h.nkv, bk, o.k, o.kScale);
  if (n == core::Numerics::Int8Fp8) {
    quantizeV(h, o.v, o.vScale);
  } else {
    o.v.resize(h.v.size());
    for (size_t e = 0; e < h.v.size(); ++e) o.v[e] = roundHalf(h.v[e]);
  }
  return o;
}

// The running state of one query row.
struct Row {
  float m = -INFINITY, l = 0;
  std::vector<float> o;
};

// P·V of one block for one row in the numerics: p holds the block's probabilities (already exponentiated).
void accumulate(core::Numerics n, bool bf16, const std::vector<float>& p, const Operands& op, int k0, int bk,
                int d, Row& row) {
  if (n == core::Numerics::Int8Fp16) {
    // fp16 accumulators per block, one rounding per 16-key MMA step, then added to fp32.
    std::vector<float> acc(d, 0.f);
    for (int s0 = 0; s0 < bk; s0 += 16)
      for (int c = 0; c < d; ++c) {
        float sum = 0;
        for (int u = s0; u < s0 + 16; ++u) sum += p[u] == 0.f ? 0.f : p[u] * op.v[size_t(k0 + u) * d + c];
        acc[c] = roundHalf(acc[c] + sum);
      }
    for (int c = 0; c < d; ++c) row.o[c] += acc[c];
    return;
  }
  for (int c = 0; c < d; ++c) {
    float blk = 0;
    for (int u = 0; u < bk; ++u)
      if (p[u] != 0.f)
        blk += (n == core::Numerics::None ? roundElem(p[u], bf16) : p[u]) * op.v[size_t(k0 + u) * d + c];
    row.o[c] += blk;
  }
}

}  // namespace

HeadOut attention(const HeadData& h, core::Numerics n, int bq, int bk, float scale, bool causal,
                  const core::Window& w, const std::vector<TileWalk>& walks, bool sumRoundedP) {
  const Operands op = prepare(h, n, bq, bk);
  const int nqT = (h.nq + bq - 1) / bq, nkT = (h.nkv + bk - 1) / bk, d = h.d;
  const int tail = bq > bk ? bq / bk : 1;
  const float offset = n == core::Numerics::Int8Fp8 ? 8.807f : 0.f;
  HeadOut res;
  res.out.assign(size_t(h.nq) * d, 0.f);
  res.skipped.assign(size_t(nqT) * nkT, 0);
  for (int i = 0; i < nqT; ++i) {
    const int r0 = i * bq, r1 = std::min(h.nq, r0 + bq);
    std::vector<Row> rows(r1 - r0);
    for (Row& r : rows) r.o.assign(d, 0.f);
    const TileWalk& walk = walks[i];
    const int nb = int(walk.blocks.size());
    for (int t = 0; t < nb; ++t) {
      const int j = walk.blocks[t], k0 = j * bk;
      const float sc = n == core::Numerics::None ? scale : scale * (op.qScale[i] * op.kScale[j]);
      std::vector<std::vector<float>> s(rows.size(), std::vector<float>(bk, -INFINITY));
      std::vector<float> rmax(rows.size(), -INFINITY);
      for (int r = r0; r < r1; ++r) {
        const KeyRange kr = visibleKeys(r, h.nkv, causal, w);
        for (int u = 0; u < bk; ++u) {
          const int key = k0 + u;
          if (key < kr.first || key > kr.last) continue;
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += double(op.q[size_t(r) * d + c]) * op.k[size_t(key) * d + c];
          s[r - r0][u] = float(dot);
          rmax[r - r0] = std::max(rmax[r - r0], float(dot));
        }
        rmax[r - r0] *= sc;
      }
      const bool eligible = !walk.dense && std::isfinite(walk.lambda) && t >= 1 && t < nb - tail;
      if (eligible) {
        float rise = -INFINITY;
        for (size_t x = 0; x < rows.size(); ++x)
          if (rmax[x] != -INFINITY)
            rise = std::max(rise, rows[x].m == -INFINITY ? INFINITY : rmax[x] - rows[x].m);
        // Quantized numerics: the zero rows padding a partial last tile vote with a rise of 0.
        if (n != core::Numerics::None && r1 - r0 < bq) rise = std::max(rise, 0.f);
        if (!(rise + walk.lambda > 0.f)) {
          res.skipped[size_t(i) * nkT + j] = 1;
          continue;
        }
      }
      for (size_t x = 0; x < rows.size(); ++x) {
        Row& row = rows[x];
        const float mnew = std::max(row.m, rmax[x]);
        const float muse = mnew == -INFINITY ? 0.f : mnew;
        const float alpha = std::exp2(row.m - muse);
        row.m = mnew;
        row.l *= alpha;
        for (float& o : row.o) o *= alpha;
        std::vector<float> p(bk, 0.f);
        for (int u = 0; u < bk; ++u) {
          if (s[x][u] == -INFINITY) continue;
          const float e = std::exp2(std::fma(s[x][u], sc, offset - muse));
          p[u] = n == core::Numerics::Int8Fp16  ? roundHalf(e)
                 : n == core::Numerics::Int8Fp8 ? e4m3Round(e)
                                                : e;
          row.l += n == core::Numerics::Int8Fp16 || sumRoundedP ? p[u] : e;
        }
        accumulate(n, h.bf16, p, op, k0, bk, d, row);
      }
    }
    for (int r = r0; r < r1; ++r) {
      const Row& row = rows[r - r0];
      if (row.l == 0.f) ++res.emptyRows;
      const float inv = row.l > 0.f ? 1.f / row.l : 0.f;
      for (int c = 0; c < d; ++c) {
        float o = row.o[c] * inv;
        if (n == core::Numerics::Int8Fp8) o *= op.vScale[c];
        res.out[size_t(r) * d + c] = roundElem(o, h.bf16);
      }
    }
  }
  return res;
}

std::vector<double> exactAttention(const HeadData& h, int bq, int bk, double scale, bool causal,
                                   const core::Window& w, const std::vector<TileWalk>& walks) {
  const int d = h.d;
  std::vector<double> out(size_t(h.nq) * d, 0.0);
  for (int r = 0; r < h.nq; ++r) {
    const KeyRange kr = visibleKeys(r, h.nkv, causal, w);
    std::vector<int> keys;
    for (int j : walks[r / bq].blocks)
      for (int key = j * bk; key < std::min(h.nkv, (j + 1) * bk); ++key)
        if (key >= kr.first && key <= kr.last) keys.push_back(key);
    if (keys.empty()) continue;
    std::vector<double> s(keys.size());
    double mx = -INFINITY, sum = 0;
    for (size_t x = 0; x < keys.size(); ++x) {
      double dot = 0;
      for (int c = 0; c < d; ++c) dot += double(h.q[size_t(r) * d + c]) * h.k[size_t(keys[x]) * d + c];
      s[x] = dot * scale;
      mx = std::max(mx, s[x]);
    }
    for (double& v : s) sum += (v = std::exp(v - mx));
    for (size_t x = 0; x < keys.size(); ++x)
      for (int c = 0; c < d; ++c) out[size_t(r) * d + c] += s[x] / sum * h.v[size_t(keys[x]) * d + c];
  }
  return out;
}

}  // namespace sparge::cuda::oracle
