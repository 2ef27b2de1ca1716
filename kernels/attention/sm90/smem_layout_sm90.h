// Shared-memory tile layout and wgmma matrix descriptors of the Hopper attention path, in plain C++
// (host and device) so that a CPU test can check the address math against the canonical layouts.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define SPARGE_HD __host__ __device__
#else
#define SPARGE_HD
#endif

namespace sparge::cuda::sm90 {

// A [R][D] tile of 16-bit elements (Q: R = 64 rows, K and V: R = 128 keys) is stored as D/64 slabs of
// 64 columns; each slab is R rows of 128 bytes and its 16-byte chunk c of row r sits at chunk
// c ^ (r % 8): the 128-byte swizzle of wgmma (atoms of 8 rows x 128 bytes, 1024-byte aligned). Read
// as K-major (rows = M or N, columns = K) it serves Q and K in Q·Kᵀ; read as MN-major (rows = K,
// columns = N) it serves V in P·V, so one copy routine fills every tile.
// Returns the element offset of 16-byte chunk `chunk` (0 .. D/8-1) of row `row`.
template <int R>
SPARGE_HD constexpr int tileChunkOffset(int row, int chunk) {
  return (chunk >> 3) * R * 64 + row * 64 + (((chunk & 7) ^ (row & 7)) << 3);
}
template <int R>
SPARGE_HD constexpr int tileElemOffset(int row, int col) {
  return tileChunkOffset<R>(row, col >> 3) + (col & 7);
}

constexpr uint32_t kSwizzleAtomBytes = 1024;  // 8 rows x 128 bytes
constexpr uint32_t kSlabRowBytes = 128;

// Matrix descriptor (PTX ISA, "matrix descriptor format"): start address >> 4 in bits 0-13, leading
// byte offset >> 4 in 16-29, stride byte offset >> 4 in 32-45, base offset 0 (atoms are 1024-byte
// aligned), swizzle mode 1 (128 bytes) in bits 62-63.
SPARGE_HD constexpr uint64_t makeDescriptor(uint32_t smemAddr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((smemAddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

// K-major operand (Q rows or K keys x head dim), k-step ks of 16 columns: inside a 128-byte row the
// step moves the start by 32 bytes (the hardware swizzles the final address), across slabs by a slab.
// The stride byte offset is the distance between 8-row groups; the leading offset is unused for
// swizzled K-major layouts (set to 16 bytes, as is customary).
template <int R>
SPARGE_HD constexpr uint64_t kMajorDescriptor(uint32_t tileAddr, int ks) {
  return makeDescriptor(tileAddr + (uint32_t)(ks >> 2) * R * kSlabRowBytes + (uint32_t)(ks & 3) * 32u, 16u,
                        kSwizzleAtomBytes);
}

// MN-major operand (V: keys = K dimension, head dim = N), k-step kk of 16 keys = two 8-key groups
// of 1024 bytes. Leading byte offset = distance between 64-column slabs along N (R rows of 128
// bytes), stride byte offset = distance between 8-key groups.
template <int R>
SPARGE_HD constexpr uint64_t mnMajorDescriptor(uint32_t tileAddr, int kk) {
  return makeDescriptor(tileAddr + (uint32_t)kk * 2u * kSwizzleAtomBytes, (uint32_t)R * kSlabRowBytes,
                        kSwizzleAtomBytes);
}

// Where k-step `byteOffset` (a multiple of 32) of a swizzled K-major tile of R rows starts, in bytes from the
// tile's start: rows are split into slabs of kSlabBytes (128: 128-byte swizzle, 64: 64-byte swizzle), slab
// after slab (what a TMA box of kSlabBytes-wide rows writes).
template <int R, int kSlabBytes>
SPARGE_HD constexpr uint32_t kMajorStepBytes(int byteOffset) {
  return (uint32_t)byteOffset / kSlabBytes * R * kSlabBytes + (uint32_t)byteOffset % kSlabBytes;
}

// Swizzled K-major operand of any width, k-step `byteOffset` (kMajorStepBytes). Serves Q and K of every
// numerics and the e4m3 V tile (rows = channels, K = keys).
template <int R, int kSlabBytes>
SPARGE_HD constexpr uint64_t kMajorDescriptorBytes(uint32_t tileAddr, int byteOffset) {
  static_assert(kSlabBytes == 128 || kSlabBytes == 64, "128- or 64-byte swizzle");
  const uint64_t mode = kSlabBytes == 128 ? 1 : 2;
  const uint64_t d =
      makeDescriptor(tileAddr + kMajorStepBytes<R, kSlabBytes>(byteOffset), 16u, 8u * kSlabBytes);
  return (d & ~(3ull << 62)) | (mode << 62);
}

// A descriptor moved on by `bytes` (a multiple of 16): only the start-address field (bits 0-13, address / 16)
// changes. Shared memory ends below 256 KB, so a tile's address + bytes stays inside the field and the add
// never carries out of it, let alone out of the low word; one 32-bit add instead of rebuilding the
// descriptor.
SPARGE_HD constexpr uint64_t advanceDescriptor(uint64_t d, uint32_t bytes) {
  return (d & 0xFFFFFFFF00000000ull) | (uint32_t)((uint32_t)d + (bytes >> 4));
}

// The 128-byte swizzle as the hardware applies it to a byte address: bits 4-6 ^= bits 7-9.
SPARGE_HD constexpr uint32_t swizzle128(uint32_t addr) {
  return addr ^ (((addr >> 7) & 7u) << 4);
}

}  // namespace sparge::cuda::sm90
