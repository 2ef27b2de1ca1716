// The Hopper attention kernel's launch: kernel parameters from the launch arguments, grid, shared memory and
// the choice of kernel per geometry; included by the instantiation files (one per head dim and numerics).
#pragma once

#include <string>
#include <type_traits>

#include "attention/sm90/kernel.cuh"
#include "attention/sm90/launch_sm90.h"
#include "attention/sm90/tma_map.h"
#include "common/cuda_util.h"
#include "sparge/core/error.h"

namespace sparge::cuda::sm90 {

template <class Tr>
Sm90Params<typename Tr::T> makeSm90Params(const Problem& pr, const AttnArgs& a) {
  Sm90Params<typename Tr::T> p;
  p.k = makeKParams<typename Tr::T>(pr, a);
  p.splitBelow = a.sm90SplitBelow >= 0.f ? a.sm90SplitBelow : Tr::kSplitBelow;
  const uint64_t bhq = (uint64_t)pr.B * pr.Hq, bhk = (uint64_t)pr.B * pr.Hkv, D = Tr::D;
  if constexpr (Tr::kFp8) {
    const auto u8 = CU_TENSOR_MAP_DATA_TYPE_UINT8;
    p.q = tensorMap3d(p.k.q, u8, 1, D, (uint64_t)pr.nq * kBQ, bhq, D, kBQ);
    p.kmap = tensorMap3d(p.k.k, u8, 1, D, (uint64_t)pr.nk * Tr::kBK, bhk, D, Tr::kBK);
    p.v = tensorMap3d(p.k.v, u8, 1, (uint64_t)fp8VTokens(pr.Nkv), D, bhk, Tr::kBK, D);
  } else {
    const auto t = std::is_same_v<typename Tr::T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                          : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    p.q = tensorMap3d(p.k.q, t, 2, D, (uint64_t)pr.Nq, bhq, 64, kBQ);
    p.kmap = tensorMap3d(p.k.k, t, 2, D, (uint64_t)pr.Nkv, bhk, 64, Tr::kBK);
    p.v = tensorMap3d(p.k.v, t, 2, D, (uint64_t)pr.Nkv, bhk, 64, Tr::kBK);
  }
  return p;
}

extern int64_t gSm90Launches;

template <class Tr>
void launch90(const Problem& pr, const AttnArgs& a, cudaStream_t s) {
  const Sm90Params<typename Tr::T> kp = makeSm90Params<Tr>(pr, a);
  const int tiles = (pr.Nq + kBQ - 1) / kBQ;  // 64-row query tiles (128x64: two a LUT row)
  dim3 grid((tiles + Tr::kConsumers - 1) / Tr::kConsumers, pr.nHeads, pr.B);
  void (*kernel)(const Sm90Params<typename Tr::T>) = nullptr;
  if constexpr (Tr::kDense)
    kernel = sparge_dense_attention_sm90<Tr>;
  else
    kernel = sparge_sparse_attention_sm90<Tr>;
  static bool attrSet = false;
  if (!attrSet) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes),
          "cudaFuncSetAttribute(attention sm90)");
    attrSet = true;
  }
  kernel<<<grid, Tr::kThreads, Tr::kSmemBytes, s>>>(kp);
  checkLaunch(Tr::kDense ? "sparge_dense_attention_sm90" : "sparge_sparse_attention_sm90");
  ++gSm90Launches;
}

template <typename T, int D, Numerics N>
void launchWalk90(const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s) {
  if constexpr (N == Numerics::None) {
    if (p.BK == 64) {  // 128x64 (attentionSm90Selected admits no other geometry with 64-key blocks)
      if (dense)
        launch90<Sm90Traits<T, D, N, true, 64>>(p, a, s);
      else
        launch90<Sm90Traits<T, D, N, false, 64>>(p, a, s);
      return;
    }
  }
  if (p.BQ != kBQ || p.BK != 128)
    throw Error("CUDA engine", "the Hopper kernel runs 64x128 tiles (and 128x64 without quantization), not " +
                                   std::to_string(p.BQ) + "x" + std::to_string(p.BK) +
                                   " (the mma.sync family runs it)");
  if (dense) {
    launch90<Sm90Traits<T, D, N, true>>(p, a, s);
    return;
  }
  if constexpr (N == Numerics::Int8Fp8) {  // the walk without the vote (exact numerics keep the one walk)
    if (!a.votes) {
      launch90<Sm90Traits<T, D, N, false, 128, false>>(p, a, s);
      return;
    }
  }
  launch90<Sm90Traits<T, D, N, false>>(p, a, s);
}

template <int D, Numerics N>
void launchSm90(ElemType t, const Problem& p, const AttnArgs& a, bool dense, cudaStream_t s) {
  if (t == ElemType::F16)
    launchWalk90<__half, D, N>(p, a, dense, s);
  else
    launchWalk90<__nv_bfloat16, D, N>(p, a, dense, s);
}

}  // namespace sparge::cuda::sm90
