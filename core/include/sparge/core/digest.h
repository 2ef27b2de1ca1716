// Content digests of capture entries: the identity a parameter file records for each input it was tuned on
// (`tuned_on`), so that parameters are not applied to another capture by mistake. The rule is in
// docs/tuning.md ("Identity of the inputs").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "sparge/core/types.h"

namespace sparge::core {

class CaptureReader;
struct EntryData;

// XXH64 (the 64-bit xxHash algorithm) of `n` bytes with `seed`: fast (four independent multiply-rotate
// lanes over 32-byte stripes) and well mixed; not a cryptographic hash.
uint64_t xxh64(const void* data, size_t n, uint64_t seed = 0);

// The hash of one head of one tensor: its [N, D] values in token-major order, each as stored (16-bit words
// for float16 and bfloat16, 32-bit words for float32), little-endian.
uint64_t headSliceHash(const void* stored, size_t values, DType dtype);
// The same from float32 values that are exactly the stored ones (an entry in memory): each value is encoded
// back to the stored width first.
uint64_t headSliceHashOfFloats(const float* values, size_t count, DType dtype);

// The entry's digest (16 hex digits) from its description (dtype, shapes, causal, window, scale) and the
// hashes of its head slices in the order q, k, v; batch; head.
std::string entryDigest(const EntryInfo& info, std::span<const uint64_t> sliceHashes);
// The digest of an entry in memory (its values must be the stored ones, as loadEntry gives them).
std::string entryDigest(const EntryData& data);
// The digest of an entry read from its capture head by head, without holding the entry in memory.
std::string entryDigest(const CaptureReader& reader, const std::string& entryName);

}  // namespace sparge::core
