// Tests of capture format v1 I/O, the fp16/bf16 conversions, core value types and atomic writes.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <tuple>

#include "sparge/core/atomic_file.h"
#include "sparge/core/capture.h"
#include "sparge/core/error.h"
#include "sparge/core/half.h"
#include "sparge/core/types.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace sparge::core;
using sparge::Error;
using sparge::test::expectError;
using sparge::test::TempDir;

namespace {

// ---------- independent reference rounding (double arithmetic, not bit tricks) ----------

// Rounds to `bits` significant bits with the smallest exponent `minExp` (unit of subnormals) and the
// largest finite value `maxFinite`; nearbyint rounds half to even in the default rounding mode.
double refRound(double x, int bits, int minExp, double maxFinite) {
  if (!std::isfinite(x) || x == 0) return x;
  int e = 0;
  std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1
  int unitExp = e - bits;
  if (unitExp < minExp) unitExp = minExp;
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, -unitExp)), unitExp);
  if (std::fabs(r) > maxFinite) return std::copysign(INFINITY, x);
  return r;
}
float refHalf(float x) {
  return float(refRound(x, 11, -24, 65504.0));
}
float refBf16(float x) {
  return float(refRound(x, 8, -133, std::ldexp(255.0, 120)));
}

// fp16 bits -> value from the textbook formula.
double refHalfValue(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1, exp = (h >> 10) & 31, mant = h & 1023;
  if (exp == 0) return sign * std::ldexp(double(mant), -24);
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(double(mant + 1024), exp - 25);
}

// ---------- synthetic data ----------

EntryInfo makeInfo(DType dtype, Layout layout) {
  EntryInfo info;
  info.name = "layer3";
  info.batch = 2;
  info.headsQ = 4;
  info.headsKV = 2;
  info.tokensQ = 37;
  info.tokensKV = 53;
  info.headDim = 16;
  info.headDimV = 24;
  info.dtype = dtype;
  info.layout = layout;
  info.causal = true;
  info.scale = 0.125;
  info.scaleFromFile = true;
  info.layer = 3;
  info.step = 7;
  return info;
}

// Values m * 2^e with |m| <= 128 and e in [-10, 4]: exact in fp16, bf16 and fp32.
std::vector<float> exactValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> m(-128, 128), e(-10, 4);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(float(m(rng)), e(rng));
  return v;
}

std::vector<float> randomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Tensors {
  std::vector<float> q, k, v;
};

Tensors makeTensors(const EntryInfo& i, bool exact, uint32_t seed) {
  auto gen = exact ? exactValues : randomValues;
  return {gen(size_t(i.batch * i.headsQ * i.tokensQ * i.headDim), seed),
          gen(size_t(i.batch * i.headsKV * i.tokensKV * i.headDim), seed + 1),
          gen(size_t(i.batch * i.headsKV * i.tokensKV * i.headDimV), seed + 2)};
}

std::vector<float> slice(const std::vector<float>& all, int64_t b, int64_t h, int64_t heads, int64_t n,
                         int64_t d) {
  const auto off = ((b * heads + h) * n) * d;
  return {all.begin() + off, all.begin() + off + n * d};
}

// ---------- raw HDF5 helpers for hand-made (bad) files, independent of CaptureWriter ----------

struct RawFile {
  hid_t file = -1;
  explicit RawFile(const std::string& path) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  }
  ~RawFile() {
    if (file >= 0) H5Fclose(file);
  }
  static void intAttr(hid_t obj, const char* name, int64_t value) {
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &value);
    H5Aclose(a);
    H5Sclose(s);
  }
  static void doubleAttr(hid_t obj, const char* name, double value) {
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, H5T_IEEE_F64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_DOUBLE, &value);
    H5Aclose(a);
    H5Sclose(s);
  }
  // A one-dimensional array attribute of `type` (h5py writes np.int64 arrays as H5T_STD_I64LE).
  static void arrayAttr(hid_t obj, const char* name, const std::vector<double>& values, hid_t type) {
    const hsize_t n = values.size();
    hid_t s = H5Screate_simple(1, &n, nullptr);
    hid_t a = H5Acreate2(obj, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_DOUBLE, values.data());
    H5Aclose(a);
    H5Sclose(s);
  }
  // Fixed-length string, as some tools write (h5py writes variable-length ones).
  static void stringAttr(hid_t obj, const char* name, const std::string& value) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, value.size());
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, value.c_str());
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
  }
  // h5py's bool: an int8 enum {FALSE = 0, TRUE = 1}.
  static void boolAttr(hid_t obj, const char* name, bool value) {
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t f = 0, tr = 1;
    H5Tenum_insert(t, "FALSE", &f);
    H5Tenum_insert(t, "TRUE", &tr);
    int8_t v = value ? 1 : 0;
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, &v);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
  }
  hid_t group(const std::string& path) {
    return H5Gcreate2(file, path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  }
  // Writes a dataset of the given file type filled with `fill` (given as doubles, converted by HDF5).
  static void dataset(hid_t group, const char* name, std::vector<hsize_t> dims, hid_t type,
                      double fill = 0.5) {
    hid_t s = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
    hid_t d = H5Dcreate2(group, name, type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = 1;
    for (hsize_t x : dims) n *= x;
    if (n > 0) {
      std::vector<double> data(n, fill);
      H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
    }
    H5Dclose(d);
    H5Sclose(s);
  }
};

// A valid fp32 capture with one entry "e0": q [1,4,8,16], k [1,2,8,16], v [1,2,8,16] (HND).
// `tweak` may change the dims/types before writing.
struct Spec {
  std::optional<int64_t> version = 1;
  bool entriesGroup = true;
  bool anyEntry = true;
  std::vector<hsize_t> q{1, 4, 8, 16}, k{1, 2, 8, 16}, v{1, 2, 8, 16};
  hid_t qType = H5T_IEEE_F32LE, kType = H5T_IEEE_F32LE, vType = H5T_IEEE_F32LE;
  bool withV = true;
};

void writeRaw(const std::string& path, const Spec& s,
              const std::function<void(hid_t entryGroup)>& extra = {}) {
  RawFile f(path);
  ASSERT_GE(f.file, 0);
  if (s.version) RawFile::intAttr(f.file, "sparge_capture_version", *s.version);
  if (!s.entriesGroup) return;
  hid_t entries = f.group("/entries");
  if (s.anyEntry) {
    hid_t g = f.group("/entries/e0");
    RawFile::dataset(g, "q", s.q, s.qType);
    RawFile::dataset(g, "k", s.k, s.kType);
    if (s.withV) RawFile::dataset(g, "v", s.v, s.vType);
    if (extra) extra(g);
    H5Gclose(g);
  }
  H5Gclose(entries);
}

void writeGood(const std::string& path, DType dtype = DType::Float16, int64_t tokens = 256) {
  EntryInfo info = makeInfo(dtype, Layout::HND);
  info.tokensQ = info.tokensKV = tokens;
  const Tensors t = makeTensors(info, false, 11);
  CaptureWriter w(path);
  w.addEntry(info, t.q, t.k, t.v);
  w.close();
}

}  // namespace

// =============================== fp16 / bf16 conversions ===============================

TEST(Half, KnownBitPatterns) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(floatToHalf(std::ldexp(1023.0f, -24)), 0x03FF);  // largest subnormal
  EXPECT_EQ(floatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xFC00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7BFF);  // below the halfway point to 65536
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);  // tie: goes to the even neighbour, inf
  const uint16_t nan = floatToHalf(NAN);
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);

  EXPECT_EQ(halfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(halfToFloat(0x7C00), INFINITY);
  EXPECT_EQ(halfToFloat(0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0xFC01)));
  EXPECT_TRUE(std::signbit(halfToFloat(0x8000)));
  EXPECT_EQ(halfToFloat(0x8000), 0.0f);
}

TEST(Half, RoundToNearestEvenTies) {
  // 1 + 2^-11 lies halfway between 1 (0x3C00, even) and 1 + 2^-10 (0x3C01).
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3*2^-11 lies halfway between 0x3C01 (odd) and 0x3C02 (even).
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Just above a tie rounds up.
  EXPECT_EQ(floatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3C01);
  // Subnormal ties: 2^-25 -> 0 (even), 3*2^-25 -> 2 units, 2^-25 slightly above -> 1 unit.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(floatToHalf(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(floatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -26)), 0x0000);
  // Halfway between the largest subnormal and the smallest normal: the normal (even mantissa) wins.
  EXPECT_EQ(floatToHalf(std::ldexp(2047.0f, -25)), 0x0400);
}

TEST(Half, AllHalfValuesDecodeLikeTheTextbookFormula) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double ref = refHalfValue(uint16_t(h));
    const float got = halfToFloat(uint16_t(h));
    if (std::isnan(ref)) {
      // The payload (and sign) stay: the 10 mantissa bits become the top of float's 23.
      const uint32_t want = (h & 0x8000u) << 16 | 0x7f800000u | (h & 0x3ffu) << 13;
      EXPECT_EQ(std::bit_cast<uint32_t>(got), want) << h;
      continue;
    }
    ASSERT_EQ(double(got), ref) << "bits " << h;
    ASSERT_EQ(std::signbit(got), bool(h & 0x8000)) << h;
    ASSERT_EQ(floatToHalf(got), h) << "round trip of bits " << h;
  }
}

TEST(Half, FloatToHalfMatchesReferenceRounding) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_real_distribution<double> logMag(-28.0, 17.0);
  int checked = 0;
  for (int i = 0; i < 400000; ++i) {
    // Half the samples cover |x| in [2^-28, 2^17) (subnormal, normal and overflow ranges), half are
    // random float bit patterns.
    float x =
        (i % 2) ? std::bit_cast<float>(bits(rng)) : float(std::exp2(logMag(rng)) * ((i % 4) < 2 ? 1 : -1));
    if (std::isnan(x)) continue;
    const float expected = refHalf(x);
    ASSERT_EQ(roundToHalf(x), expected) << "x = " << x;
    ++checked;
  }
  EXPECT_GT(checked, 300000);
}

TEST(Bf16, KnownBitPatternsAndTies) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBf16(-2.0f), 0xC000);
  EXPECT_EQ(floatToBf16(INFINITY), 0x7F80);
  EXPECT_EQ(floatToBf16(-INFINITY), 0xFF80);
  EXPECT_EQ(floatToBf16(3.4028235e38f), 0x7F80);  // FLT_MAX is above the last halfway point
  const uint16_t nan = floatToBf16(NAN);
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_TRUE(
      std::isnan(bf16ToFloat(floatToBf16(std::bit_cast<float>(0x7F800001u)))));  // signalling NaN stays NaN
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);                   // tie -> even
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);               // tie -> even
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0x00008000u)), 0x0000);             // subnormal tie -> even
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0x00018000u)), 0x0002);
  EXPECT_EQ(bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(bf16ToFloat(0x7F80), INFINITY);
  EXPECT_EQ(bf16ToFloat(0x3EAB), 0.333984375f);
}

TEST(Bf16, MatchesReferenceRounding) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 400000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    if (std::isnan(x)) continue;
    ASSERT_EQ(roundToBf16(x), refBf16(x)) << "x = " << x;
  }
}

// =============================== types ===============================

TEST(Types, GeometryLabelsAndParsing) {
  EXPECT_EQ(kGeometry128x64.label(), "128x64");
  EXPECT_EQ(kGeometry64x128.label(), "64x128");
  EXPECT_EQ(Geometry::parse("128x64"), kGeometry128x64);
  EXPECT_EQ(Geometry::parse("64x128"), kGeometry64x128);
  EXPECT_EQ(Geometry::parse(" 64X128 "), kGeometry64x128);
  for (const char* bad : {"", "128x128", "64x64", "128", "x", "128x64x1", "abc"}) {
    expectError([&] { Geometry::parse(bad); }, {"use 128x64 or 64x128"});
  }
}

TEST(Types, NamesAndSizes) {
  EXPECT_STREQ(toString(DType::Float16), "float16");
  EXPECT_STREQ(toString(DType::BFloat16), "bfloat16");
  EXPECT_STREQ(toString(DType::Float32), "float32");
  EXPECT_STREQ(toString(Layout::HND), "HND");
  EXPECT_STREQ(toString(Layout::NHD), "NHD");
  EXPECT_STREQ(toString(Tensor::Q), "q");
  EXPECT_STREQ(toString(Tensor::V), "v");
  EntryInfo i = makeInfo(DType::Float16, Layout::HND);
  // q 2*4*37*16 + k 2*2*53*16 + v 2*2*53*24 values, 2 bytes each.
  EXPECT_EQ(i.bytesOnDisk(), (4736 + 3392 + 5088) * 2);
  i.dtype = DType::Float32;
  EXPECT_EQ(i.bytesOnDisk(), (4736 + 3392 + 5088) * 4);
}

// =============================== round trip ===============================

namespace {

// The physical layout of the round-trip file, checked with the raw HDF5 API rather than our reader.
void expectStoredLayout(const std::string& path, DType dtype, Layout layout, const std::vector<float>& exactQ) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t d = H5Dopen2(f, "/entries/layer3/v", H5P_DEFAULT);
  ASSERT_GE(d, 0);
  hid_t s = H5Dget_space(d);
  hsize_t dims[4] = {};
  ASSERT_EQ(H5Sget_simple_extent_ndims(s), 4);
  H5Sget_simple_extent_dims(s, dims, nullptr);
  const std::vector<hsize_t> got(dims, dims + 4);
  EXPECT_EQ(got, (layout == Layout::HND ? std::vector<hsize_t>{2, 2, 53, 24}
                                        : std::vector<hsize_t>{2, 53, 2, 24}));
  hid_t t = H5Dget_type(d);
  EXPECT_EQ(H5Tget_class(t), dtype == DType::BFloat16 ? H5T_INTEGER : H5T_FLOAT);
  EXPECT_EQ(H5Tget_size(t), dtype == DType::Float32 ? 4u : 2u);
  EXPECT_EQ(H5Aexists(d, "dtype") > 0, dtype == DType::BFloat16);
  // Every stored q value at its layout position. HDF5 decodes float16 itself here (not our code),
  // which also checks that our half encoding is the standard one h5py/numpy use.
  hid_t dq = H5Dopen2(f, "/entries/layer3/q", H5P_DEFAULT);
  std::vector<float> stored(exactQ.size());
  if (dtype == DType::BFloat16) {
    std::vector<uint16_t> raw(stored.size());
    ASSERT_GE(H5Dread(dq, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()), 0);
    for (size_t i = 0; i < raw.size(); ++i) stored[i] = std::bit_cast<float>(uint32_t(raw[i]) << 16);
  } else {
    ASSERT_GE(H5Dread(dq, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, stored.data()), 0);
  }
  H5Dclose(dq);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t n = 0; n < 37; ++n)
        for (int64_t c = 0; c < 16; ++c) {
          const int64_t file =
              layout == Layout::HND ? ((b * 4 + h) * 37 + n) * 16 + c : ((b * 37 + n) * 4 + h) * 16 + c;
          ASSERT_EQ(stored[size_t(file)], exactQ[size_t(((b * 4 + h) * 37 + n) * 16 + c)])
              << b << h << n << c;
        }
  hid_t g = H5Gopen2(f, "/entries/layer3", H5P_DEFAULT);
  EXPECT_EQ(H5Aexists(g, "layout") > 0, layout == Layout::NHD);
  EXPECT_GT(H5Aexists(g, "scale"), 0);
  H5Gclose(g);
  g = H5Gopen2(f, "/entries/random", H5P_DEFAULT);
  EXPECT_EQ(H5Aexists(g, "scale"), 0);
  EXPECT_EQ(H5Aexists(g, "layer"), 0);
  H5Gclose(g);
  H5Tclose(t);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
}

}  // namespace

class RoundTrip : public ::testing::TestWithParam<std::tuple<DType, Layout>> {};

TEST_P(RoundTrip, WriterThenReaderGivesTheRoundedValues) {
  const auto [dtype, layout] = GetParam();
  TempDir dir;
  const std::string path = dir.file("rt.h5");
  const EntryInfo info = makeInfo(dtype, layout);
  const Tensors exact = makeTensors(info, true, 100);
  const Tensors random = makeTensors(info, false, 200);
  EntryInfo info2 = info;
  info2.name = "random";
  info2.causal = false;
  info2.scaleFromFile = false;
  info2.layer.reset();
  info2.step.reset();
  {
    CaptureWriter w(path);
    w.setRootAttribute("model", "tiny-test-model");
    w.addEntry(info, exact.q, exact.k, exact.v);
    w.addEntry(info2, random.q, random.k, random.v);
  }

  expectStoredLayout(path, dtype, layout, exact.q);

  CaptureReader r(path);
  EXPECT_EQ(r.version(), 1);
  ASSERT_EQ(r.entries().size(), 2u);
  const EntryInfo& got = r.entry("layer3");
  EXPECT_EQ(got.batch, 2);
  EXPECT_EQ(got.headsQ, 4);
  EXPECT_EQ(got.headsKV, 2);
  EXPECT_EQ(got.tokensQ, 37);
  EXPECT_EQ(got.tokensKV, 53);
  EXPECT_EQ(got.headDim, 16);
  EXPECT_EQ(got.headDimV, 24);
  EXPECT_EQ(got.dtype, dtype);
  EXPECT_EQ(got.layout, layout);
  EXPECT_TRUE(got.causal);
  EXPECT_TRUE(got.scaleFromFile);
  EXPECT_DOUBLE_EQ(got.scale, 0.125);
  EXPECT_EQ(got.layer, std::optional<int64_t>(3));
  EXPECT_EQ(got.step, std::optional<int64_t>(7));
  EXPECT_EQ(got.groupSize(), 2);
  const EntryInfo& got2 = r.entry("random");
  EXPECT_FALSE(got2.causal);
  EXPECT_FALSE(got2.scaleFromFile);
  EXPECT_DOUBLE_EQ(got2.scale, 0.25);  // 1/sqrt(16)
  EXPECT_FALSE(got2.layer.has_value());
  EXPECT_FALSE(got2.step.has_value());
  bool sawModel = false;
  for (const auto& [k, v] : r.rootAttributes()) sawModel |= (k == "model" && v == "tiny-test-model");
  EXPECT_TRUE(sawModel);

  auto rounded = [&](std::vector<float> x) {
    for (float& f : x) f = dtype == DType::Float16 ? refHalf(f) : dtype == DType::BFloat16 ? refBf16(f) : f;
    return x;
  };
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t h = 0; h < 4; ++h) {
      EXPECT_EQ(r.readHead("layer3", Tensor::Q, b, h), slice(exact.q, b, h, 4, 37, 16)) << b << "," << h;
      EXPECT_EQ(r.readHead("random", Tensor::Q, b, h), rounded(slice(random.q, b, h, 4, 37, 16)));
    }
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_EQ(r.readHead("layer3", Tensor::K, b, h), slice(exact.k, b, h, 2, 53, 16));
      EXPECT_EQ(r.readHead("layer3", Tensor::V, b, h), slice(exact.v, b, h, 2, 53, 24));
      EXPECT_EQ(r.readHead("random", Tensor::K, b, h), rounded(slice(random.k, b, h, 2, 53, 16)));
      EXPECT_EQ(r.readHead("random", Tensor::V, b, h), rounded(slice(random.v, b, h, 2, 53, 24)));
    }
  }
  std::vector<NonFiniteReport> nonFinite;
  const EntryData data = loadEntry(r, "random", &nonFinite);
  EXPECT_TRUE(nonFinite.empty());
  auto values = [](const FloatBuffer& x) { return std::vector<float>(x.begin(), x.end()); };
  EXPECT_EQ(values(data.q), rounded(random.q));
  EXPECT_EQ(values(data.k), rounded(random.k));
  EXPECT_EQ(values(data.v), rounded(random.v));
  EXPECT_EQ(data.vHead(1, 1)[5], rounded(random.v)[(3 * 53) * 24 + 5]);
}

INSTANTIATE_TEST_SUITE_P(AllDtypesAndLayouts, RoundTrip,
                         ::testing::Combine(::testing::Values(DType::Float16, DType::Float32,
                                                              DType::BFloat16),
                                            ::testing::Values(Layout::HND, Layout::NHD)),
                         [](const auto& p) {
                           return std::string(toString(std::get<0>(p.param))) + "_" +
                                  toString(std::get<1>(p.param));
                         });

TEST(CaptureReader, EntriesInNaturalOrder) {
  TempDir dir;
  const std::string path = dir.file("order.h5");
  {
    CaptureWriter w(path);
    EntryInfo info = makeInfo(DType::Float32, Layout::HND);
    info.batch = 1;
    const Tensors t = makeTensors(info, true, 1);
    for (const char* name : {"l10", "l2", "l1", "a", "l02x"}) {
      info.name = name;
      w.addEntry(info, t.q, t.k, t.v);
    }
  }
  CaptureReader r(path);
  std::vector<std::string> names;
  for (const EntryInfo& e : r.entries()) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "l1", "l2", "l02x", "l10"}));
}

TEST(CaptureReader, HandMadeFileDefaultsAndAttributeVariants) {
  TempDir dir;
  const std::string path = dir.file("defaults.h5");
  writeRaw(path, Spec{});
  {
    CaptureReader r(path);
    const EntryInfo& e = r.entry("e0");
    EXPECT_FALSE(e.causal);
    EXPECT_FALSE(e.scaleFromFile);
    EXPECT_DOUBLE_EQ(e.scale, 0.25);
    EXPECT_EQ(e.layout, Layout::HND);
    EXPECT_EQ(e.dtype, DType::Float32);
    EXPECT_EQ(r.readHead("e0", Tensor::Q, 0, 3), std::vector<float>(8 * 16, 0.5f));
  }
  // h5py-style bool causal, fixed-length string layout, integer scale.
  Spec nhd;
  nhd.q = {1, 8, 4, 16};
  nhd.k = nhd.v = {1, 8, 2, 16};
  writeRaw(path, nhd, [](hid_t g) {
    RawFile::boolAttr(g, "causal", true);
    RawFile::stringAttr(g, "layout", "NHD");
    RawFile::intAttr(g, "scale", 2);
    RawFile::intAttr(g, "layer", 5);
  });
  CaptureReader r(path);
  const EntryInfo& e = r.entry("e0");
  EXPECT_TRUE(e.causal);
  EXPECT_EQ(e.layout, Layout::NHD);
  EXPECT_EQ(e.headsQ, 4);
  EXPECT_EQ(e.tokensQ, 8);
  EXPECT_TRUE(e.scaleFromFile);
  EXPECT_DOUBLE_EQ(e.scale, 2.0);
  EXPECT_EQ(e.layer, std::optional<int64_t>(5));
}

void expectExtras(const EntryInfo& e, Window window, const std::string& module, const std::string& kind,
                  const std::string& stack) {
  EXPECT_EQ(e.window, window);
  EXPECT_EQ(e.module, module);
  EXPECT_EQ(e.kind, kind);
  EXPECT_EQ(e.stack, stack);
}

TEST(CaptureReader, WindowAndIdentityAttributesFromRawApi) {
  TempDir dir;
  const std::string path = dir.file("window.h5");
  writeRaw(path, Spec{}, [](hid_t g) {
    RawFile::intAttr(g, "causal", 1);
    RawFile::arrayAttr(g, "window", {4095, 0}, H5T_STD_I64LE);
    RawFile::stringAttr(g, "module", "model.layers.3.self_attn");
    RawFile::stringAttr(g, "kind", "self");
    RawFile::stringAttr(g, "stack", "decoder");
  });
  expectExtras(CaptureReader(path).entry("e0"), {4095, 0}, "model.layers.3.self_attn", "self", "decoder");
  // Absent attributes: no window (both sides unbounded), empty identity; int32 windows are accepted too.
  writeRaw(path, Spec{});
  EXPECT_FALSE(CaptureReader(path).entry("e0").window.bounded());
  EXPECT_EQ(CaptureReader(path).entry("e0").kind, "");
  writeRaw(path, Spec{}, [](hid_t g) { RawFile::arrayAttr(g, "window", {-1, 16}, H5T_STD_I32LE); });
  EXPECT_EQ(CaptureReader(path).entry("e0").window, (Window{-1, 16}));
}

TEST(CaptureWriter, WindowAndIdentityRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("rt.h5");
  EntryInfo info = makeInfo(DType::Float16, Layout::HND);
  info.window = {511, 0};
  info.module = "model.decoder.layers.3.encoder_attn";
  info.kind = "cross";
  info.stack = "decoder";
  const Tensors t = makeTensors(info, false, 5);
  {
    CaptureWriter w(path);
    w.addEntry(info, t.q, t.k, t.v);
    info.name = "plain";
    info.window = {};
    info.module = info.kind = info.stack = "";
    w.addEntry(info, t.q, t.k, t.v);
  }
  expectExtras(CaptureReader(path).entry("layer3"), {511, 0}, "model.decoder.layers.3.encoder_attn", "cross",
               "decoder");
  // Nothing is written for an unbounded window or empty strings.
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  for (const char* a : {"window", "module", "kind", "stack"}) {
    EXPECT_GT(H5Aexists_by_name(f, "/entries/layer3", a, H5P_DEFAULT), 0) << a;
    EXPECT_EQ(H5Aexists_by_name(f, "/entries/plain", a, H5P_DEFAULT), 0) << a;
  }
  H5Fclose(f);
}

TEST(CaptureReader, BigEndianAndBf16FromRawApi) {
  TempDir dir;
  const std::string path = dir.file("be.h5");
  Spec s;
  s.qType = H5T_IEEE_F32BE;
  writeRaw(path, s);
  EXPECT_EQ(CaptureReader(path).readHead("e0", Tensor::Q, 0, 0), std::vector<float>(128, 0.5f));

  // bf16 as big-endian uint16 bits + attribute: 0x3FC0 = 1.5.
  {
    RawFile f(path);
    RawFile::intAttr(f.file, "sparge_capture_version", 1);
    H5Gclose(f.group("/entries"));
    hid_t g = f.group("/entries/e0");
    for (const char* n : {"q", "k", "v"}) {
      RawFile::dataset(g, n, {1, 2, 4, 8}, H5T_STD_U16BE, double(0x3FC0));
      hid_t d = H5Dopen2(g, n, H5P_DEFAULT);
      RawFile::stringAttr(d, "dtype", "bfloat16");
      H5Dclose(d);
    }
    H5Gclose(g);
  }
  CaptureReader r(path);
  EXPECT_EQ(r.entry("e0").dtype, DType::BFloat16);
  EXPECT_EQ(r.readHead("e0", Tensor::V, 0, 1), std::vector<float>(32, 1.5f));
}

// =============================== bad inputs ===============================

class BadCapture : public ::testing::Test {
 protected:
  TempDir dir;
  std::string path = dir.file("bad.h5");
  void expectOpenError(const Spec& s, std::initializer_list<std::string> parts,
                       const std::function<void(hid_t)>& extra = {}) {
    writeRaw(path, s, extra);
    std::vector<std::string> all{path};
    all.insert(all.end(), parts.begin(), parts.end());
    try {
      CaptureReader r(path);
      ADD_FAILURE() << "opened without error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const std::string& p : all)
        EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
      if (std::getenv("SPARGE_SHOW_ERRORS")) std::printf("  message: %s\n", msg.c_str());
    }
  }
};

TEST_F(BadCapture, MissingFile) {
  expectError([&] { CaptureReader r(dir.file("nope.h5")); }, {dir.file("nope.h5"), "file not found"});
}

TEST_F(BadCapture, NotHdf5) {
  std::ofstream(path) << "q,k,v\n1,2,3\n";
  expectError([&] { CaptureReader r(path); }, {path, "not an HDF5 file"});
}

TEST_F(BadCapture, Truncated) {
  const std::string good = dir.file("good.h5");
  writeGood(good);
  EXPECT_NO_THROW(CaptureReader{good});
  fs::copy_file(good, path);
  fs::resize_file(path, fs::file_size(good) / 2);
  expectError([&] { CaptureReader r(path); }, {path + ":/", "file is truncated or corrupt"});
}

TEST_F(BadCapture, CorruptDataChunkFailsAtReadTime) {
  writeGood(path);  // float16, one gzip chunk per head
  {
    // Find q's chunk for (batch 0, head 1) with the raw API and overwrite its bytes.
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/entries/layer3/q", H5P_DEFAULT);
    const hsize_t coord[4] = {0, 1, 0, 0};
    unsigned filterMask = 0;
    haddr_t addr = 0;
    hsize_t size = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(d, coord, &filterMask, &addr, &size), 0);
    H5Dclose(d);
    H5Fclose(f);
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(std::streamoff(addr));
    const std::string junk(size_t(size), '\x55');
    io.write(junk.data(), std::streamsize(junk.size()));
  }
  CaptureReader r(path);  // metadata is intact
  EXPECT_NO_THROW(r.readHead("layer3", Tensor::Q, 0, 0));
  expectError([&] { r.readHead("layer3", Tensor::Q, 0, 1); },
              {path + ":/entries/layer3/q", "batch 0 head 1", "file is truncated or corrupt"});
  expectError([&] { loadEntry(r, "layer3"); }, {"file is truncated or corrupt"});
  // Read on other threads (and on a thread that never opened a file), the error is ours alone: a thread-safe
  // HDF5 keeps its "print errors" setting per thread, and its own report must not reach stderr.
  for (int threads : {1, 4}) {
    ::testing::internal::CaptureStderr();
    std::thread([&] {
      expectError([&] { loadEntry(r, "layer3", nullptr, threads); }, {"file is truncated or corrupt"});
    }).join();
    const std::string printed = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(printed.find("HDF5-DIAG"), std::string::npos) << printed;
  }
}

TEST_F(BadCapture, MissingVersion) {
  Spec s;
  s.version.reset();
  expectOpenError(s, {":/", "missing root attribute sparge_capture_version"});
}

TEST_F(BadCapture, UnknownVersion) {
  Spec s;
  s.version = 2;
  expectOpenError(s, {":/", "unknown capture version 2"});
}

TEST_F(BadCapture, NoEntriesGroup) {
  Spec s;
  s.entriesGroup = false;
  expectOpenError(s, {":/entries", "no /entries group"});
}

TEST_F(BadCapture, NoEntries) {
  Spec s;
  s.anyEntry = false;
  expectOpenError(s, {":/entries", "no entries"});
}

TEST_F(BadCapture, MissingDataset) {
  Spec s;
  s.withV = false;
  expectOpenError(s, {":/entries/e0/v", "missing dataset v"});
}

TEST_F(BadCapture, WrongRank) {
  Spec s;
  s.q = {4, 8, 16};
  expectOpenError(s, {":/entries/e0/q", "wrong rank 3", "must have rank 4"});
}

TEST_F(BadCapture, MismatchedBatch) {
  Spec s;
  s.k = {2, 2, 8, 16};
  expectOpenError(s, {":/entries/e0/k", "mismatched batch"});
}

TEST_F(BadCapture, MismatchedHeadDim) {
  Spec s;
  s.k = {1, 2, 8, 32};
  expectOpenError(s, {":/entries/e0/k", "mismatched head dim", "D = 32", "D = 16"});
}

TEST_F(BadCapture, MismatchedKvHeads) {
  Spec s;
  s.v = {1, 4, 8, 16};
  expectOpenError(s, {":/entries/e0/v", "mismatched heads"});
}

TEST_F(BadCapture, MismatchedKvTokens) {
  Spec s;
  s.v = {1, 2, 9, 16};
  expectOpenError(s, {":/entries/e0/v", "mismatched tokens"});
}

TEST_F(BadCapture, HqNotMultipleOfHkv) {
  Spec s;
  s.q = {1, 3, 8, 16};
  expectOpenError(s, {":/entries/e0/k", "Hq = 3", "not a multiple", "Hkv = 2"});
}

TEST_F(BadCapture, UnsupportedDtypeInt32) {
  Spec s;
  s.qType = H5T_STD_I32LE;
  expectOpenError(s, {":/entries/e0/q", "unsupported dtype int32", "float16, float32", "bfloat16"});
}

TEST_F(BadCapture, UnsupportedDtypeFloat64) {
  Spec s;
  s.vType = H5T_IEEE_F64LE;
  expectOpenError(s, {":/entries/e0/v", "unsupported dtype float64"});
}

TEST_F(BadCapture, Uint16WithoutBf16Attribute) {
  Spec s;
  s.qType = s.kType = s.vType = H5T_STD_U16LE;
  expectOpenError(s, {":/entries/e0/q", "uint16", "dtype = \"bfloat16\""});
}

TEST_F(BadCapture, ZeroSizeDimension) {
  Spec s;
  s.k = {1, 2, 0, 16};
  s.v = {1, 2, 0, 16};
  expectOpenError(s, {":/entries/e0/k", "zero-size dimension"});
}

TEST_F(BadCapture, BadLayoutAttribute) {
  expectOpenError(Spec{}, {":/entries/e0", "layout", "\"BHND\""},
                  [](hid_t g) { RawFile::stringAttr(g, "layout", "BHND"); });
}

TEST_F(BadCapture, BadScaleAttribute) {
  expectOpenError(Spec{}, {":/entries/e0", "scale", "positive"},
                  [](hid_t g) { RawFile::doubleAttr(g, "scale", -1); });
}

TEST_F(BadCapture, WindowOfWrongTypeOrShape) {
  const char* help = "two integers [left, right]";
  expectOpenError(Spec{}, {":/entries/e0", "window is not an integer array", help}, [](hid_t g) {
    RawFile::arrayAttr(g, "window", {128, 0}, H5T_IEEE_F64LE);
  });
  expectOpenError(Spec{}, {":/entries/e0", "window must hold exactly two values", help}, [](hid_t g) {
    RawFile::arrayAttr(g, "window", {128, 0, 3}, H5T_STD_I64LE);
  });
  expectOpenError(Spec{}, {":/entries/e0", "window must hold exactly two values"},
                  [](hid_t g) { RawFile::intAttr(g, "window", 128); });
  expectOpenError(Spec{}, {":/entries/e0", "window is not an integer array"},
                  [](hid_t g) { RawFile::stringAttr(g, "window", "128,0"); });
}

TEST_F(BadCapture, WindowValuesOutOfRange) {
  expectOpenError(Spec{}, {":/entries/e0", "window [-2, 0]", "below -1"}, [](hid_t g) {
    RawFile::arrayAttr(g, "window", {-2, 0}, H5T_STD_I64LE);
  });
  // A causal entry whose window looks ahead contradicts itself.
  expectOpenError(Spec{}, {":/entries/e0", "window [64, 5]", "causal", "right = 0"}, [](hid_t g) {
    RawFile::intAttr(g, "causal", 1);
    RawFile::arrayAttr(g, "window", {64, 5}, H5T_STD_I64LE);
  });
}

TEST_F(BadCapture, BadIdentityAttributes) {
  expectOpenError(Spec{}, {":/entries/e0", "kind = \"encoder\"", "\"self\"", "\"cross\""},
                  [](hid_t g) { RawFile::stringAttr(g, "kind", "encoder"); });
  expectOpenError(Spec{}, {":/entries/e0", "attribute module is not a string"},
                  [](hid_t g) { RawFile::intAttr(g, "module", 3); });
  expectOpenError(Spec{}, {":/entries/e0", "attribute stack is not a string"},
                  [](hid_t g) { RawFile::doubleAttr(g, "stack", 1.5); });
}

TEST_F(BadCapture, ReadHeadOutOfRangeAndUnknownEntry) {
  writeRaw(path, Spec{});
  CaptureReader r(path);
  expectError([&] { r.readHead("e0", Tensor::Q, 1, 0); },
              {path + ":/entries/e0/q", "batch index 1 out of range"});
  expectError([&] { r.readHead("e0", Tensor::K, 0, 2); },
              {path + ":/entries/e0/k", "head index 2 out of range"});
  expectError([&] { r.readHead("e0", Tensor::Q, 0, -1); }, {"head index -1 out of range"});
  expectError([&] { r.readHead("e9", Tensor::Q, 0, 0); }, {path + ":/entries/e9", "no such entry", "e0"});
  expectError([&] { loadEntry(r, "e9"); }, {"no such entry"});
}

TEST(CaptureWriter, RejectsBadEntries) {
  TempDir dir;
  const std::string path = dir.file("w.h5");
  CaptureWriter w(path);
  EntryInfo info = makeInfo(DType::Float16, Layout::HND);
  Tensors t = makeTensors(info, true, 3);
  t.q.pop_back();
  expectError([&] { w.addEntry(info, t.q, t.k, t.v); }, {path + ":/entries/layer3/q", "expected"});
  info.headsQ = 3;
  expectError([&] { w.addEntry(info, t.q, t.k, t.v); }, {"not a multiple"});
  info = makeInfo(DType::Float16, Layout::HND);
  t = makeTensors(info, true, 3);
  w.addEntry(info, t.q, t.k, t.v);
  expectError([&] { w.addEntry(info, t.q, t.k, t.v); }, {"written twice"});
  info.name = "a/b";
  expectError([&] { w.addEntry(info, t.q, t.k, t.v); }, {"invalid entry name"});
  info.name = "windowed";
  info.window = {16, 4};  // causal entry looking ahead
  expectError([&] { w.addEntry(info, t.q, t.k, t.v); },
              {path + ":/entries/windowed", "window [16, 4]", "causal"});
  info.window = {-3, 0};
  expectError([&] { w.addEntry(info, t.q, t.k, t.v); }, {"window [-3, 0]", "below -1"});
  info.window = {};
  info.kind = "joint";
  expectError([&] { w.addEntry(info, t.q, t.k, t.v); }, {"kind = \"joint\""});
  expectError([&] { CaptureWriter bad(dir.file("missing-folder/x.h5")); },
              {"missing-folder/x.h5", "cannot create"});
}

// =============================== NaN / Inf ===============================

TEST(CaptureReader, LoadEntryReportsNonFiniteHeads) {
  for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16}) {
    TempDir dir;
    const std::string path = dir.file("nan.h5");
    const EntryInfo info = makeInfo(dtype, Layout::NHD);
    Tensors t = makeTensors(info, true, 5);
    // q: batch 1, head 2 gets two NaNs; v: batch 0, KV head 1 gets one +inf.
    t.q[((1 * 4 + 2) * 37 + 3) * 16 + 1] = NAN;
    t.q[((1 * 4 + 2) * 37 + 30) * 16 + 15] = NAN;
    t.v[((0 * 2 + 1) * 53 + 52) * 24 + 0] = INFINITY;
    {
      CaptureWriter w(path);
      w.addEntry(info, t.q, t.k, t.v);
    }
    CaptureReader r(path);
    std::vector<NonFiniteReport> reports;
    EntryData d;
    ASSERT_NO_THROW(d = loadEntry(r, "layer3", &reports));
    ASSERT_EQ(reports.size(), 2u) << toString(dtype);
    EXPECT_EQ(reports[0].tensor, Tensor::Q);
    EXPECT_EQ(reports[0].batch, 1);
    EXPECT_EQ(reports[0].head, 2);
    EXPECT_EQ(reports[0].count, 2);
    EXPECT_EQ(reports[1].tensor, Tensor::V);
    EXPECT_EQ(reports[1].batch, 0);
    EXPECT_EQ(reports[1].head, 1);
    EXPECT_EQ(reports[1].count, 1);
    EXPECT_TRUE(std::isnan(d.qHead(1, 2)[3 * 16 + 1]));
    EXPECT_EQ(d.vHead(0, 1)[52 * 24], INFINITY);
    EXPECT_NO_THROW(loadEntry(r, "layer3"));  // no report vector: still fine
  }
}

// One stored representation of q, k and v for the test below, written bit for bit through the HDF5 API
// (no CaptureWriter) and decoded independently of the reader.
struct StoredBits {
  const char* name;
  DType dtype;
  bool bigEndian;
};

// The value of stored bits by the textbook formulas (NaN for every NaN pattern).
double storedValue(uint32_t bits, DType dtype) {
  if (dtype == DType::Float16) return refHalfValue(uint16_t(bits));
  if (dtype == DType::Float32) return double(std::bit_cast<float>(bits));
  const int sign = (bits & 0x8000) ? -1 : 1, exp = (bits >> 7) & 255, mant = bits & 127;
  if (exp == 255) return mant ? NAN : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(double(mant), -133);
  return sign * std::ldexp(double(mant + 128), exp - 134);
}

// A file type for `kind`: IEEE fp32, IEEE fp16 (built from its fields) or bf16 as uint16.
hid_t storedType(const StoredBits& kind) {
  hid_t t = -1;
  if (kind.dtype == DType::Float32) {
    t = H5Tcopy(H5T_IEEE_F32LE);
  } else if (kind.dtype == DType::Float16) {
    t = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
  } else {
    t = H5Tcopy(H5T_STD_U16LE);
  }
  if (kind.bigEndian) H5Tset_order(t, H5T_ORDER_BE);
  return t;
}

// Random bit patterns: about one value in eight NaN or ±Inf (payloads and signs random), the rest finite
// (zeros, subnormals and the largest finite values included); the first values of a head are fixed
// boundary cases.
std::vector<uint32_t> storedPatterns(size_t n, DType dtype, std::mt19937& rng) {
  const int bits = dtype == DType::Float32 ? 32 : 16;
  const int mantBits = dtype == DType::Float32 ? 23 : dtype == DType::Float16 ? 10 : 7;
  const uint32_t expAll = ((1u << (bits - 1 - mantBits)) - 1) << mantBits, signBit = 1u << (bits - 1);
  const uint32_t mask = bits == 32 ? 0xffffffffu : 0xffffu;
  std::uniform_int_distribution<uint32_t> any(0, mask);
  std::vector<uint32_t> out(n);
  for (uint32_t& x : out) {
    x = any(rng);
    const bool nonFinite = any(rng) % 8 == 0;
    if (nonFinite)
      x |= expAll;
    else if ((x & expAll) == expAll)
      x &= ~(1u << mantBits);  // lowest exponent bit cleared: finite
  }
  const uint32_t fixed[] = {expAll,      expAll | signBit, expAll | 1u, expAll - 1,
                            0u,          signBit,          1u,          expAll | (1u << (mantBits - 1)),
                            signBit | 1u};
  for (size_t i = 0; i < std::size(fixed) && i < n; ++i) out[i] = fixed[i];
  return out;
}

// Writes `values` (HND, one tensor) with the file type of `kind`, byte-swapped by the test for big endian.
void writeStored(hid_t group, const char* name, const std::vector<hsize_t>& dims,
                 const std::vector<uint32_t>& values, const StoredBits& kind) {
  hid_t type = storedType(kind);
  hid_t space = H5Screate_simple(4, dims.data(), nullptr);
  hid_t d = H5Dcreate2(group, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (kind.dtype == DType::Float32) {
    std::vector<uint32_t> raw(values);
    if (kind.bigEndian)
      for (uint32_t& x : raw) x = __builtin_bswap32(x);
    H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data());
  } else {
    std::vector<uint16_t> raw(values.begin(), values.end());
    if (kind.bigEndian)
      for (uint16_t& x : raw) x = __builtin_bswap16(x);
    H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data());
  }
  if (kind.dtype == DType::BFloat16) RawFile::stringAttr(d, "dtype", "bfloat16");
  H5Dclose(d);
  H5Sclose(space);
  H5Tclose(type);
}

TEST(CaptureReader, LoadEntryCountsEveryNonFiniteValue) {
  const StoredBits kinds[] = {{"f32", DType::Float32, false},   {"f32be", DType::Float32, true},
                              {"f16", DType::Float16, false},   {"f16be", DType::Float16, true},
                              {"bf16", DType::BFloat16, false}, {"bf16be", DType::BFloat16, true}};
  const std::vector<hsize_t> qDims{2, 4, 37, 16}, kDims{2, 2, 53, 16}, vDims{2, 2, 53, 24};
  for (const StoredBits& kind : kinds) {
    TempDir dir;
    const std::string path = dir.file("nonfinite.h5");
    std::mt19937 rng(31);
    std::vector<std::vector<uint32_t>> stored;
    {
      RawFile f(path);
      RawFile::intAttr(f.file, "sparge_capture_version", 1);
      H5Gclose(f.group("/entries"));
      hid_t g = f.group("/entries/e0");
      const char* names[] = {"q", "k", "v"};
      const std::vector<hsize_t>* dims[] = {&qDims, &kDims, &vDims};
      for (int t = 0; t < 3; ++t) {
        const size_t n = (*dims[t])[0] * (*dims[t])[1] * (*dims[t])[2] * (*dims[t])[3];
        stored.push_back(storedPatterns(n, kind.dtype, rng));
        writeStored(g, names[t], *dims[t], stored.back(), kind);
      }
      H5Gclose(g);
    }
    // The expected reports: one per (tensor, b, head) holding non-finite values, in that order.
    std::vector<NonFiniteReport> expected;
    for (int t = 0; t < 3; ++t) {
      const std::vector<hsize_t>& dims = t == 0 ? qDims : t == 1 ? kDims : vDims;
      const size_t perHead = dims[2] * dims[3];
      for (hsize_t b = 0; b < dims[0]; ++b)
        for (hsize_t h = 0; h < dims[1]; ++h) {
          int64_t count = 0;
          for (size_t i = 0; i < perHead; ++i)
            count += !std::isfinite(storedValue(stored[t][(b * dims[1] + h) * perHead + i], kind.dtype));
          if (count > 0) expected.push_back({int64_t(b), int64_t(h), Tensor(t), count});
        }
    }
    ASSERT_EQ(expected.size(), 2u * (4 + 2 + 2)) << "every head holds some NaN/Inf";
    CaptureReader r(path);
    for (int threads : {1, 3}) {
      std::vector<NonFiniteReport> reports;
      const EntryData d = loadEntry(r, "e0", &reports, threads);
      ASSERT_EQ(reports.size(), expected.size()) << kind.name;
      for (size_t i = 0; i < reports.size(); ++i) {
        EXPECT_EQ(reports[i].tensor, expected[i].tensor) << kind.name << " report " << i;
        EXPECT_EQ(reports[i].batch, expected[i].batch) << kind.name << " report " << i;
        EXPECT_EQ(reports[i].head, expected[i].head) << kind.name << " report " << i;
        EXPECT_EQ(reports[i].count, expected[i].count) << kind.name << " report " << i;
      }
      const FloatBuffer* loaded[] = {&d.q, &d.k, &d.v};
      for (int t = 0; t < 3; ++t) {
        ASSERT_EQ(loaded[t]->size(), stored[t].size());
        for (size_t i = 0; i < stored[t].size(); ++i) {
          const double want = storedValue(stored[t][i], kind.dtype);
          const float got = (*loaded[t])[i];
          if (std::isnan(want))
            ASSERT_TRUE(std::isnan(got)) << kind.name << " tensor " << t << " value " << i;
          else
            ASSERT_EQ(double(got), want) << kind.name << " tensor " << t << " value " << i;
        }
      }
    }
  }
}

// =============================== atomic writes ===============================

TEST(AtomicFile, FailedWriteKeepsTheOldFileAndLeavesNoTemp) {
  TempDir dir;
  const std::string path = dir.file("report.json");
  writeTextAtomically(path, "old contents");
  EXPECT_THROW(writeAtomically(path,
                               [](const std::string& temp) {
                                 std::ofstream(temp) << "half-written";
                                 throw Error(temp, "simulated failure");
                               }),
               Error);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "old contents");
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);

  writeTextAtomically(path, "new contents");
  std::ifstream in2(path);
  std::string text2((std::istreambuf_iterator<char>(in2)), {});
  EXPECT_EQ(text2, "new contents");
}

TEST(AtomicFile, CaptureWriterFailureKeepsTheOldCapture) {
  TempDir dir;
  const std::string path = dir.file("cap.h5");
  writeGood(path, DType::Float32, 16);
  EXPECT_THROW(writeAtomically(path,
                               [](const std::string& temp) {
                                 CaptureWriter w(temp);
                                 EntryInfo info = makeInfo(DType::Float16, Layout::HND);
                                 w.addEntry(info, std::vector<float>{1.f}, {}, {});  // wrong sizes: throws
                               }),
               Error);
  CaptureReader r(path);
  EXPECT_EQ(r.entries().size(), 1u);
  EXPECT_EQ(r.entry("layer3").dtype, DType::Float32);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);
}

// =============================== speed (printed, not asserted) ===============================

TEST(CaptureBenchmark, ReadFp16HeadByHead) {
  TempDir dir;
  const int64_t H = 32, N = 4096, D = 128;  // 16.8 M values
  EntryInfo info;
  info.name = "big";
  info.batch = 1;
  info.headsQ = H;
  info.headsKV = 1;
  info.tokensQ = N;
  info.tokensKV = 16;
  info.headDim = info.headDimV = D;
  info.dtype = DType::Float16;
  const std::vector<float> q = randomValues(size_t(H * N * D), 9), kv = randomValues(size_t(16 * D), 10);

  // Our writer (gzip + shuffle chunks) and an h5py-default-like contiguous uncompressed file.
  const std::string gz = dir.file("gz.h5"), plain = dir.file("plain.h5");
  {
    CaptureWriter w(gz);
    w.addEntry(info, q, kv, kv);
  }
  {
    RawFile f(plain);
    RawFile::intAttr(f.file, "sparge_capture_version", 1);
    H5Gclose(f.group("/entries"));
    hid_t g = f.group("/entries/big");
    hid_t half = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(half, 15, 10, 5, 0, 10);
    H5Tset_size(half, 2);
    H5Tset_ebias(half, 15);
    std::vector<uint16_t> bits(q.size());
    for (size_t i = 0; i < q.size(); ++i) bits[i] = floatToHalf(q[i]);
    hsize_t qd[4] = {1, hsize_t(H), hsize_t(N), hsize_t(D)}, kd[4] = {1, 1, 16, hsize_t(D)};
    hid_t qs = H5Screate_simple(4, qd, nullptr), ks = H5Screate_simple(4, kd, nullptr);
    hid_t dq = H5Dcreate2(g, "q", half, qs, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(dq, half, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits.data());
    H5Dclose(dq);
    for (const char* n : {"k", "v"}) RawFile::dataset(g, n, {1, 1, 16, hsize_t(D)}, half);
    H5Sclose(qs);
    H5Sclose(ks);
    H5Tclose(half);
    H5Gclose(g);
  }
  for (const std::string& p : {plain, gz}) {
    CaptureReader r(p);
    const auto t0 = std::chrono::steady_clock::now();
    double sum = 0;
    for (int64_t h = 0; h < H; ++h) sum += r.readHead("big", Tensor::Q, 0, h)[0];
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[bench] fp16 %lld values head by head (%s): %.3f s (%.0f M values/s) [check %g]\n",
                (long long)(H * N * D), p == gz ? "gzip+shuffle chunks" : "contiguous, uncompressed", s,
                double(H * N * D) / s / 1e6, sum);
    EXPECT_EQ(r.readHead("big", Tensor::Q, 0, H - 1)[D + 1], roundToHalf(q[((H - 1) * N + 1) * D + 1]));
  }
}
