// The CPU engine's tile kernels (core/src/tile_kernels.h) against scalar oracles written here, for every
// instruction-set variant this CPU runs and for the 16-lane source (AVX-512's width) built for AVX2: products
// against double sums, INT8 pair products exactly, masks, 2^x with each P rounding, the online-softmax
// update, the error sums and the quantizers' roundings over special values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "sparge/core/half.h"
#include "sparge/core/quant.h"
#include "test_util.h"
#include "tile_kernels.h"

namespace sparge::core::tile::wide_test {
const Kernels& kernels();
}

using namespace sparge::core;
using namespace sparge::core::tile;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Every kernel set to check: the variants this CPU runs, and the 16-lane build when the CPU has AVX2.
std::vector<const Kernels*> kernelSets() {
  std::vector<const Kernels*> sets;
  const std::vector<std::string> names = variants();
  for (const std::string& n : names) {
    useVariant(n);
    sets.push_back(&kernels());
  }
  useVariant(names.front());
  if (std::find(names.begin(), names.end(), "avx2") != names.end()) sets.push_back(&wide_test::kernels());
  return sets;
}

// Floats of many kinds: zeros, subnormals, both roundings' boundaries and ties, saturation, inf and NaN.
std::vector<float> specialValues() {
  std::vector<float> v = {0.0f,         -0.0f,    kInf,     -kInf,    std::numeric_limits<float>::quiet_NaN(),
                          448.0f,       464.0f,   480.0f,   -500.0f,  65504.0f,
                          65520.0f,     1e6f,     0x1p-6f,  0x1p-9f,  0x1p-10f,
                          3 * 0x1p-10f, 0x1p-14f, 0x1p-24f, 0x1p-25f, 3 * 0x1p-25f,
                          1e-40f};
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  while (v.size() < 4096) v.push_back(std::bit_cast<float>(bits(rng)));
  for (float x : std::vector<float>(v)) v.push_back(std::nextafter(x, kInf));
  return v;
}

TEST(TileKernels, ProductsMatchDoubleSumsWithAndWithoutFp16Steps) {
  for (const Kernels* k : kernelSets()) {
    const int step = k->columnStep;
    for (int rows : {1, 5, 7, 13, 128})
      for (int depth : {16, 64})
        for (bool fp16 : {false, true}) {
          const int cols = 4 * step;
          const std::vector<float> a = sparge::test::normalValues(size_t(rows) * depth, 1),
                                   b = sparge::test::normalValues(size_t(depth) * cols, 2, 0.5f);
          std::vector<float> c(size_t(rows) * cols, -1.0f);
          k->multiply(rows, cols, depth, a.data(), depth, b.data(), cols, 2.0f, fp16, c.data(), cols);
          for (int r = 0; r < rows; ++r)
            for (int j = 0; j < cols; ++j) {
              double acc = 0, mag = 0;
              for (int t = 0; t < depth; ++t) {
                acc += double(a[size_t(r) * depth + t]) * b[size_t(t) * cols + j];
                mag += std::fabs(double(a[size_t(r) * depth + t]) * b[size_t(t) * cols + j]);
                if (fp16 && t % 16 == 15) acc = roundToHalf(float(acc));
              }
              // fp32 sums: a few ulps of the magnitude; fp16 steps: an fp16 ulp per step as well.
              const double tol = 2 * (1e-6 * mag + (fp16 ? mag * 0x1p-10 : 0.0)) + 1e-7;
              ASSERT_NEAR(c[size_t(r) * cols + j], 2 * acc, tol)
                  << k->isa << " rows " << rows << " col " << j;
            }
        }
  }
}

TEST(TileKernels, Int8PairProductsAreExact) {
  for (const Kernels* k : kernelSets()) {
    std::mt19937_64 rng(3);
    std::uniform_int_distribution<int> code(-127, 127);
    const int rows = 11, pairs = 33, cols = 2 * k->columnStep;  // 66 codes a row, the last pair half empty
    std::vector<int> qa(size_t(rows) * pairs * 2), kb(size_t(cols) * pairs * 2);
    for (int& x : qa) x = code(rng);
    for (int& x : kb) x = code(rng);
    auto pair = [](int lo, int hi) {
      return int32_t(uint32_t(uint16_t(int16_t(lo))) | (uint32_t(uint16_t(int16_t(hi))) << 16));
    };
    std::vector<int32_t> a(size_t(rows) * pairs), b(size_t(pairs) * cols);
    for (int r = 0; r < rows; ++r)
      for (int p = 0; p < pairs; ++p)
        a[size_t(r) * pairs + p] =
            pair(qa[size_t(r) * pairs * 2 + 2 * p], qa[size_t(r) * pairs * 2 + 2 * p + 1]);
    for (int j = 0; j < cols; ++j)
      for (int p = 0; p < pairs; ++p)
        b[size_t(p) * cols + j] =
            pair(kb[size_t(j) * pairs * 2 + 2 * p], kb[size_t(j) * pairs * 2 + 2 * p + 1]);
    std::vector<float> c(size_t(rows) * cols);
    k->multiplyInt8(rows, cols, pairs, a.data(), pairs, b.data(), cols, 0.125f, c.data(), cols);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < cols; ++j) {
        int64_t sum = 0;
        for (int t = 0; t < 2 * pairs; ++t)
          sum += int64_t(qa[size_t(r) * pairs * 2 + t]) * kb[size_t(j) * pairs * 2 + t];
        ASSERT_EQ(c[size_t(r) * cols + j], float(sum) * 0.125f) << k->isa;
      }
  }
}

TEST(TileKernels, MasksKeepTheVisibleRangeAndProbeOnlyIt) {
  for (const Kernels* k : kernelSets()) {
    const int cols = 2 * k->columnStep, rows = 5;
    std::vector<float> s = sparge::test::normalValues(size_t(rows) * cols, 4);
    s[size_t(2) * cols + 0] = kInf;  // row 2 sees keys 3..cols-1: the inf is hidden
    const std::vector<int> lo = {0, 5, 3, 10, -4}, hi = {cols - 1, 5, cols + 7, 2, 1000};  // row 3 sees none
    const std::vector<float> before = s;
    std::vector<float> rowMax(rows);
    EXPECT_FALSE(k->maskAndMax(s.data(), cols, rows, cols, lo.data(), hi.data(), rowMax.data())) << k->isa;
    for (int r = 0; r < rows; ++r) {
      float m = -kInf;
      for (int j = 0; j < cols; ++j) {
        const bool seen = j >= lo[size_t(r)] && j <= hi[size_t(r)];
        EXPECT_EQ(s[size_t(r) * cols + j], seen ? before[size_t(r) * cols + j] : -kInf);
        if (seen) m = std::max(m, before[size_t(r) * cols + j]);
      }
      EXPECT_EQ(rowMax[size_t(r)], m) << k->isa << " row " << r;
    }
    s = before;
    s[size_t(4) * cols + 3] = std::numeric_limits<float>::quiet_NaN();  // visible NaN: flagged
    EXPECT_TRUE(k->maskAndMax(s.data(), cols, rows, cols, lo.data(), hi.data(), rowMax.data())) << k->isa;
  }
}

TEST(TileKernels, ExponentialsRoundAndSumAsTheKernelsDo) {
  for (const Kernels* k : kernelSets()) {
    const int cols = 2 * k->columnStep, rows = 3;
    std::vector<float> s = sparge::test::normalValues(size_t(rows) * cols, 5, 4.0f);
    s[1] = -kInf;
    s[2] = -200.0f;
    const std::vector<float> offset = {0.0f, 8.807f - 3.0f, -kInf};
    for (PRounding rounding : {PRounding::None, PRounding::Fp16, PRounding::E4m3}) {
      std::vector<float> p(s.size()), sum(rows);
      k->exponentiate(s.data(), cols, p.data(), cols, rows, cols, offset.data(), rounding, sum.data());
      for (int r = 0; r < rows; ++r) {
        double want = 0;
        for (int j = 0; j < cols; ++j) {
          const double e = std::exp2(double(s[size_t(r) * cols + j]) + offset[size_t(r)]);
          const float got = p[size_t(r) * cols + j];
          const float exact = float(e);
          if (rounding == PRounding::None) {
            EXPECT_NEAR(got, e, 1e-6 * e + 1e-38) << k->isa;
          } else if (rounding == PRounding::Fp16) {
            EXPECT_EQ(got, roundToHalf(got));  // an fp16 value, within one fp16 step of the exact one
            EXPECT_NEAR(got, e, std::fabs(exact) * 0x1p-10 + 0x1p-24);
          } else {
            EXPECT_EQ(got, roundToE4m3(got));  // an e4m3 value: saturated at 448, else within one step
            const double saturated = std::min(e, 448.0);
            EXPECT_NEAR(got, saturated, saturated * 0x1p-3 + 0x1p-9);
          }
          want += rounding == PRounding::Fp16 ? double(got) : e;
        }
        EXPECT_NEAR(sum[size_t(r)], want, 1e-5 * want + 1e-30) << k->isa;
      }
    }
  }
}

// The rounded P is exactly the scalar rounding of the unrounded P, over every binade P spans (e4m3's
// subnormals, saturation at 448, fp16's subnormals) and ties.
TEST(TileKernels, RoundedProbabilitiesEqualTheScalarRoundings) {
  for (const Kernels* k : kernelSets()) {
    const int cols = 8 * k->columnStep, rows = 2;
    std::vector<float> s(size_t(rows) * cols);
    std::mt19937_64 rng(13);
    std::uniform_real_distribution<float> u(-40.0f, 1.0f);
    for (float& x : s) x = u(rng);
    for (int j = 0; j < 64; ++j) s[size_t(j)] = float(j - 50) + 0.5f;  // around the e4m3 and fp16 steps
    const std::vector<float> offset = {8.807f, 0.0f};
    std::vector<float> plain(s.size()), e4m3(s.size()), fp16(s.size()), sum(rows);
    k->exponentiate(s.data(), cols, plain.data(), cols, rows, cols, offset.data(), PRounding::None,
                    sum.data());
    k->exponentiate(s.data(), cols, e4m3.data(), cols, rows, cols, offset.data(), PRounding::E4m3,
                    sum.data());
    k->exponentiate(s.data(), cols, fp16.data(), cols, rows, cols, offset.data(), PRounding::Fp16,
                    sum.data());
    for (size_t i = 0; i < s.size(); ++i) {
      ASSERT_EQ(e4m3[i], roundToE4m3(plain[i])) << k->isa << " p " << plain[i];
      ASSERT_EQ(fp16[i], roundToHalf(plain[i])) << k->isa << " p " << plain[i];
    }
  }
}

TEST(TileKernels, BlockMassAddsEachRowsShare) {
  for (const Kernels* k : kernelSets()) {
    const int rows = 5, blocks = k->columnStep + 3;  // a vector part and a scalar tail
    std::vector<float> sum = sparge::test::normalValues(size_t(rows) * blocks, 14), max(sum.size());
    std::mt19937_64 rng(15);
    std::uniform_real_distribution<float> u(-20.0f, 0.0f);
    for (size_t i = 0; i < sum.size(); ++i) {
      sum[i] = std::fabs(sum[i]);
      max[i] = i % 7 == 3 ? -kInf : u(rng);  // -inf: a slot the row did not see
    }
    const std::vector<float> m = {0.5f, 0.0f, 1.0f, -2.0f, 3.0f},
                             l = {2.0f, 0.0f, 1.5f, 0.25f, 8.0f};  // row 1: empty
    std::vector<float> mass(size_t(blocks), -1.0f);
    k->blockMass(sum.data(), max.data(), blocks, m.data(), l.data(), rows, mass.data());
    for (int b = 0; b < blocks; ++b) {
      double want = 0;
      for (int r = 0; r < rows; ++r) {
        const size_t i = size_t(r) * blocks + b;
        if (l[size_t(r)] > 0 && max[i] != -kInf)
          want += sum[i] * std::exp2(double(max[i]) - m[size_t(r)]) / l[size_t(r)];
      }
      EXPECT_NEAR(mass[size_t(b)], want, 1e-6 * want + 1e-30) << k->isa << " block " << b;
    }
  }
}

TEST(TileKernels, SoftmaxUpdateAndErrorSums) {
  for (const Kernels* k : kernelSets()) {
    const int rows = 2 * k->columnStep + 3;  // a vector part and a scalar tail
    std::vector<float> m = sparge::test::normalValues(size_t(rows), 6),
                       mx = sparge::test::normalValues(size_t(rows), 7), mNew(rows), alpha(rows);
    m[0] = mx[0] = -kInf;  // has seen nothing yet: alpha 1
    m[1] = -kInf;
    EXPECT_TRUE(k->advanceMaxima(m.data(), mx.data(), rows, mNew.data(), alpha.data()));
    for (int r = 0; r < rows; ++r) {
      EXPECT_EQ(mNew[size_t(r)], std::max(m[size_t(r)], mx[size_t(r)]));
      const double want = r == 0 ? 1.0 : std::exp2(double(m[size_t(r)]) - mNew[size_t(r)]);
      EXPECT_NEAR(alpha[size_t(r)], want, 1e-6 * want) << k->isa << " row " << r;
    }
    const int cols = k->columnStep;
    std::vector<float> acc = sparge::test::normalValues(size_t(rows) * cols, 8),
                       g = sparge::test::normalValues(size_t(rows) * cols, 9);
    const std::vector<float> before = acc;
    k->rescaleAdd(acc.data(), g.data(), cols, alpha.data(), rows, cols);
    for (size_t i = 0; i < acc.size(); ++i)
      EXPECT_NEAR(acc[i], double(before[i]) * alpha[i / size_t(cols)] + g[i],
                  1e-6 * (std::fabs(before[i]) + std::fabs(g[i])));
    const std::vector<float> o = sparge::test::normalValues(1001, 10),
                             ref = sparge::test::normalValues(1001, 11);
    const CompareSums c = k->compare(o.data(), ref.data(), o.size());
    double absDiff = 0, dot = 0, sq = 0;
    for (size_t i = 0; i < o.size(); ++i) {
      absDiff += std::fabs(double(o[i]) - ref[i]);
      dot += double(o[i]) * ref[i];
      sq += (double(o[i]) - ref[i]) * (double(o[i]) - ref[i]);
    }
    EXPECT_NEAR(c.absDiff, absDiff, 1e-9 * absDiff);
    EXPECT_NEAR(c.dot, dot, 1e-9 * std::fabs(dot) + 1e-9);
    EXPECT_NEAR(c.sqDiff, sq, 1e-9 * sq);
    EXPECT_FALSE(c.nonFinite);
    std::vector<float> bad = o;
    bad[1000] = kInf;  // in the scalar tail
    EXPECT_TRUE(k->compare(bad.data(), ref.data(), bad.size()).nonFinite) << k->isa;
  }
}

TEST(TileKernels, QuantizerRoundingsMatchTheScalarOnesOnSpecialValues) {
  const std::vector<float> v = specialValues();
  for (const Kernels* k : kernelSets()) {
    // One channel a value: the codes of recip 1 are e4m3(fp16(v)); amax ignores NaN.
    const int dv = int(v.size());
    const std::vector<float> recip(v.size(), 1.0f);
    std::vector<float> codes(v.size()), amax(v.size(), 0.0f);
    k->channelCodesFp8(v.data(), 1, dv, recip.data(), codes.data(), dv);
    k->channelAmax(v.data(), 1, dv, amax.data());
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = roundToE4m3(roundToHalf(v[i]));
      EXPECT_EQ(std::bit_cast<uint32_t>(codes[i]), std::bit_cast<uint32_t>(want)) << k->isa << " " << v[i];
      EXPECT_EQ(amax[i], std::fmax(0.0f, std::fabs(roundToHalf(v[i])))) << k->isa << " " << v[i];
    }
    // INT8 tiles of 8 x 16 values (bf16 and fp16 inputs, with and without a mean), finite values only.
    std::vector<float> x;
    for (float f : v)
      if (std::isfinite(f) && std::fabs(f) < 6e4f) x.push_back(f);
    x.resize(x.size() / 128 * 128);
    const std::vector<float> mean = sparge::test::normalValues(16, 12);
    for (DType t : {DType::Float16, DType::BFloat16})
      for (const float* mu : {static_cast<const float*>(nullptr), mean.data()})
        for (size_t at = 0; at < x.size(); at += 128) {
          std::vector<float> got(128);
          const float scale = k->quantizeTileInt8(x.data() + at, 8, 16, mu, t, got.data());
          float am = 0.0f;
          std::vector<float> rounded(128);
          for (int i = 0; i < 128; ++i) {
            rounded[size_t(i)] = roundToInput(x[at + size_t(i)], t);
            if (mu) rounded[size_t(i)] = roundToInput(rounded[size_t(i)] - mu[i % 16], t);
            am = std::max(am, std::fabs(rounded[size_t(i)]));
          }
          ASSERT_EQ(scale, int8Scale(am)) << k->isa;
          for (int i = 0; i < 128; ++i)
            ASSERT_EQ(got[size_t(i)], float(quantizeInt8(rounded[size_t(i)], scale))) << k->isa;
        }
  }
}

}  // namespace
