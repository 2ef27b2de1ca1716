// Entry digests: XXH64 over each head's stored values, then over the entry's description and those hashes.
#include "sparge/core/digest.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "sparge/core/capture.h"
#include "sparge/core/half.h"
#include "sparge/core/parallel.h"

namespace sparge::core {
namespace {

// The stored words are hashed as little-endian bytes; on this byte order that is their memory image.
static_assert(std::endian::native == std::endian::little, "entry digests assume a little-endian host");

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full, kP3 = 0x165667B19E3779F9ull,
                   kP4 = 0x85EBCA77C2B2AE63ull, kP5 = 0x27D4EB2F165667C5ull;

inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t round64(uint64_t acc, uint64_t input) {
  return std::rotl(acc + input * kP2, 31) * kP1;
}
inline uint64_t merge64(uint64_t acc, uint64_t v) {
  return (acc ^ round64(0, v)) * kP1 + kP4;
}

// Values of one head encoded back to their stored width, a block at a time.
template <class Encode>
uint64_t hashEncoded(const float* values, size_t count, size_t width, Encode encode) {
  std::vector<unsigned char> bytes(count * width);
  for (size_t i = 0; i < count; ++i) encode(values[i], bytes.data() + i * width);
  return xxh64(bytes.data(), bytes.size());
}

}  // namespace

uint64_t xxh64(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + n;
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    for (; p + 32 <= end; p += 32) {
      v1 = round64(v1, read64(p));
      v2 = round64(v2, read64(p + 8));
      v3 = round64(v3, read64(p + 16));
      v4 = round64(v4, read64(p + 24));
    }
    h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    h = merge64(merge64(merge64(merge64(h, v1), v2), v3), v4);
  } else {
    h = seed + kP5;
  }
  h += uint64_t(n);
  for (; p + 8 <= end; p += 8) h = std::rotl(h ^ round64(0, read64(p)), 27) * kP1 + kP4;
  if (p + 4 <= end) {
    h = std::rotl(h ^ (uint64_t(read32(p)) * kP1), 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p) h = std::rotl(h ^ (uint64_t(*p) * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t headSliceHash(const void* stored, size_t values, DType dtype) {
  return xxh64(stored, values * (dtype == DType::Float32 ? 4 : 2));
}

uint64_t headSliceHashOfFloats(const float* values, size_t count, DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return xxh64(values, count * 4);
    case DType::Float16:
      return hashEncoded(values, count, 2, [](float x, unsigned char* out) {
        const uint16_t h = floatToHalf(x);
        std::memcpy(out, &h, 2);
      });
    case DType::BFloat16:
      return hashEncoded(values, count, 2, [](float x, unsigned char* out) {
        const uint16_t h = floatToBf16(x);
        std::memcpy(out, &h, 2);
      });
  }
  return 0;
}

std::string entryDigest(const EntryInfo& info, std::span<const uint64_t> sliceHashes) {
  char head[512];
  std::snprintf(head, sizeof head,
                "sparge-entry-digest-1 dtype=%s q=[%lld,%lld,%lld,%lld] k=[%lld,%lld,%lld,%lld] "
                "v=[%lld,%lld,%lld,%lld] causal=%d window=[%lld,%lld] scale=%.17g\n",
                toString(info.dtype), (long long)info.batch, (long long)info.headsQ, (long long)info.tokensQ,
                (long long)info.headDim, (long long)info.batch, (long long)info.headsKV,
                (long long)info.tokensKV, (long long)info.headDim, (long long)info.batch,
                (long long)info.headsKV, (long long)info.tokensKV, (long long)info.headDimV,
                info.causal ? 1 : 0, (long long)info.window.left, (long long)info.window.right, info.scale);
  std::vector<unsigned char> bytes(head, head + std::strlen(head));
  for (uint64_t s : sliceHashes) {
    unsigned char b[8];
    std::memcpy(b, &s, 8);
    bytes.insert(bytes.end(), b, b + 8);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)xxh64(bytes.data(), bytes.size()));
  return hex;
}

std::string entryDigest(const EntryData& d) {
  const EntryInfo& in = d.info;
  std::vector<uint64_t> hashes;
  auto add = [&](const FloatBuffer& t, int64_t heads, int64_t perHead) {
    for (int64_t b = 0; b < in.batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        hashes.push_back(
            headSliceHashOfFloats(t.data() + (b * heads + h) * perHead, size_t(perHead), in.dtype));
  };
  add(d.q, in.headsQ, in.tokensQ * in.headDim);
  add(d.k, in.headsKV, in.tokensKV * in.headDim);
  add(d.v, in.headsKV, in.tokensKV * in.headDimV);
  return entryDigest(in, hashes);
}

std::string entryDigest(const CaptureReader& reader, const std::string& entryName) {
  const EntryInfo& in = reader.entry(entryName);
  struct Slice {
    Tensor tensor;
    int64_t b, h, values;
  };
  std::vector<Slice> slices;
  auto add = [&](Tensor t, int64_t heads, int64_t perHead) {
    for (int64_t b = 0; b < in.batch; ++b)
      for (int64_t h = 0; h < heads; ++h) slices.push_back({t, b, h, perHead});
  };
  add(Tensor::Q, in.headsQ, in.tokensQ * in.headDim);
  add(Tensor::K, in.headsKV, in.tokensKV * in.headDim);
  add(Tensor::V, in.headsKV, in.tokensKV * in.headDimV);
  std::vector<uint64_t> hashes(slices.size());
  parallelFor(int64_t(slices.size()), bulkThreads(), [&](int64_t i) {
    const Slice& s = slices[size_t(i)];
    thread_local std::vector<float> buffer;
    buffer.resize(size_t(s.values));
    reader.readHeadInto(entryName, s.tensor, s.b, s.h, buffer.data(), nullptr, &hashes[size_t(i)]);
  });
  return entryDigest(in, hashes);
}

}  // namespace sparge::core
