// PTX wrappers for the sm80-class path (also runs on sm90): cp.async, ldmatrix, mma.sync (m16n8k16 fp16/bf16
// with fp32 or fp16 accumulators, m16n8k8 tf32, m16n8k32 s8 and e4m3), named barriers, and the XOR swizzle of
// 16-byte chunks used by every shared-memory tile.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace sparge::cuda::sm80 {

__device__ __forceinline__ uint32_t smemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; `pred` false zero-fills the destination (rows past N read nothing).
__device__ __forceinline__ void cpAsync16(uint32_t dst, const void* src, bool pred) {
  int size = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(size));
}
__device__ __forceinline__ void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <typename T>
struct Mma;
template <>
struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// D = A·B + C with fp16 accumulators (two half2 registers): the per-block P·V buffer of the int8-fp16
// numerics.
__device__ __forceinline__ void mmaF16Acc(uint32_t (&c)[2], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
               : "+r"(c[0]), "+r"(c[1])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// INT8 Q·Kᵀ: m16n8k32, exact int32 accumulation.
__device__ __forceinline__ void mmaS8(int32_t (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// TF32 m16n8k8 with fp32 accumulators (A row-major 16x8, B column-major 8x8): the fp32 reference's P·V, whose
// V (16-bit values) is exact in TF32.
__device__ __forceinline__ void mmaTf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// FP8 P·V: m16n8k32 e4m3 x e4m3 with fp32 accumulators. The instruction exists from sm_89; the launcher
// refuses older devices, so other images only trap.
__device__ __forceinline__ void mmaE4m3(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)c, (void)a, (void)b0, (void)b1;
  __trap();
#endif
}

// Barrier among `count` threads (a multiple of 32) on hardware barrier `id` (0 is __syncthreads).
__device__ __forceinline__ void namedBarrierSync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// Element offset of 16-byte chunk `chunk` of row `row` in a [rows][D] tile: chunks are XORed with
// row % 8 so that 8 consecutive rows of one logical chunk hit 8 distinct bank groups (ldmatrix and
// cp.async are conflict-free for D = 64 and 128).
template <int D>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of kRowChunks chunks per row (4, 8, 16 or 32).
// Rows of 8 or more chunks XOR the chunk with row % 8 (as swz); rows of 4 chunks (64 bytes: two rows per
// 128-byte bank line) XOR with (row / 2) % 4. Either way the 8 rows one ldmatrix reads hit 8 distinct bank
// groups.
template <int kRowChunks>
__device__ __forceinline__ uint32_t chunkOffset(int row, int chunk) {
  static_assert(kRowChunks == 4 || kRowChunks == 8 || kRowChunks == 16 || kRowChunks == 32,
                "4, 8, 16 or 32 chunks per row");
  const int x = kRowChunks >= 8 ? (row & 7) : ((row >> 1) & 3);
  return (uint32_t)(row * kRowChunks + (chunk ^ x)) << 4;
}

}  // namespace sparge::cuda::sm80
