// Entry digests: XXH64 against its published test vectors, and the digest rule: the same from a capture's
// raw reads, a head-by-head read and the values in memory; independent of layout; different when a value,
// the causal flag, the window or the scale differ.
#include <gtest/gtest.h>

#include <cstring>

#include "sparge/core/capture.h"
#include "sparge/core/digest.h"
#include "sparge/core/half.h"
#include "sparge/core/synthetic.h"
#include "test_util.h"

namespace sparge::core {
namespace {

TEST(Digest, Xxh64KnownVectors) {
  // The values published with xxHash (and its Python binding's documentation).
  EXPECT_EQ(xxh64("", 0), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(xxh64("a", 1), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(xxh64("abc", 3), 0x44BC2CF5AD770999ull);
  const char* spam = "Nobody inspects the spammish repetition";  // 39 bytes: one 32-byte stripe and a tail
  EXPECT_EQ(xxh64(spam, std::strlen(spam)), 0xFBCEA83C8A378BF1ull);
  EXPECT_EQ(xxh64("xxhash", 6, 20141025), 0xB559B98D844E0635ull);
}

EntryData smallEntry(DType dtype, Layout layout) {
  SynthSpec s;
  s.headsQ = 4;
  s.headsKV = 2;
  s.tokensQ = s.tokensKV = 200;
  s.headDim = s.headDimV = 32;
  s.segment = 64;
  s.dtype = dtype;
  s.layout = layout;
  s.seed = 5;
  EntryData e = makeSyntheticEntry(s);
  e.info.name = "e0";
  return e;
}

std::string writeOne(const test::TempDir& dir, const std::string& file, const EntryData& e) {
  const std::string path = dir.file(file);
  CaptureWriter w(path, CaptureWriter::Compression::None);
  w.addEntry(e.info, e.q, e.k, e.v);
  w.close();
  return path;
}

TEST(Digest, SameFromEveryPathAndLayout) {
  test::TempDir dir;
  for (DType dtype : {DType::Float16, DType::BFloat16, DType::Float32}) {
    const EntryData hnd = smallEntry(dtype, Layout::HND);
    const std::string a = writeOne(dir, "hnd.h5", hnd);
    const std::string b = writeOne(dir, "nhd.h5", smallEntry(dtype, Layout::NHD));
    CaptureReader ra(a), rb(b);
    const EntryData loaded = loadEntry(ra, "e0");
    ASSERT_EQ(loaded.digest.size(), 16u);
    EXPECT_EQ(loaded.digest, entryDigest(loaded)) << toString(dtype);         // re-encoded from memory
    EXPECT_EQ(loaded.digest, entryDigest(ra, "e0")) << toString(dtype);       // read head by head
    EXPECT_EQ(loaded.digest, loadEntry(rb, "e0").digest) << toString(dtype);  // same content, NHD layout
    EXPECT_EQ(loaded.digest, entryDigest(hnd)) << toString(dtype);  // the generator's values themselves
  }
}

TEST(Digest, ChangesWithContentAndAttributes) {
  test::TempDir dir;
  const EntryData base = smallEntry(DType::Float16, Layout::HND);
  CaptureReader r0(writeOne(dir, "base.h5", base));
  const std::string d0 = loadEntry(r0, "e0").digest;
  auto digestOf = [&](const EntryData& e, const std::string& name) {
    CaptureReader r(writeOne(dir, name, e));
    return loadEntry(r, "e0").digest;
  };
  EntryData v = base;
  v.v[v.v.size() - 1] = roundToHalf(v.v[v.v.size() - 1] + 1.0f);  // the last value of V
  EXPECT_NE(digestOf(v, "v.h5"), d0);
  EntryData q = base;
  q.q[0] = -q.q[0] + 1.0f;
  EXPECT_NE(digestOf(q, "q.h5"), d0);
  EntryData causal = base;
  causal.info.causal = true;
  EXPECT_NE(digestOf(causal, "c.h5"), d0);
  EntryData window = base;
  window.info.window = {16, 0};
  EXPECT_NE(digestOf(window, "w.h5"), d0);
  EntryData scale = base;
  scale.info.scale = 0.1;
  scale.info.scaleFromFile = true;
  EXPECT_NE(digestOf(scale, "s.h5"), d0);
  // The name is not content: the same values under another name have the same digest.
  EntryData renamed = base;
  CaptureWriter w(dir.file("n.h5"), CaptureWriter::Compression::None);
  renamed.info.name = "other";
  w.addEntry(renamed.info, renamed.q, renamed.k, renamed.v);
  w.close();
  CaptureReader rn(dir.file("n.h5"));
  EXPECT_EQ(loadEntry(rn, "other").digest, d0);
}

}  // namespace
}  // namespace sparge::core
