// The kernel parameters shared by every Stage-2 attention kernel family (sm80 mma.sync, sm90 wgmma), and
// their construction from the launcher's Problem and AttnArgs, so the families cannot drift apart.
#pragma once

#include <cstdint>

#include "common/launch.h"
#include "attention/parts/block_walk.cuh"

namespace sparge::cuda {

// Tokens of the e4m3 V layout written by launchQuantize: [B*Hkv][D][fp8VTokens(Nkv)], zero padding, so that
// a 128-key block (and a 64-key one) never reads past a channel row.
__host__ __device__ inline int fp8VTokens(int nKv) {
  return (nKv + 127) / 128 * 128;
}

template <typename T>
struct KParams {
  // Exact numerics: T [B*H][N][D]. Quantized: q and k are INT8 per tile (QuantOperands), v is fp16
  // (int8-fp16) or e4m3 [B*Hkv][D][fp8VTokens(Nkv)] (int8-fp8).
  const void* q;
  const void* k;
  const void* v;
  T* o;
  const float* qScale;  // [B*Hq][nq]
  const float* kScale;  // [B*Hkv][nk]
  const float* vScale;  // [B*Hkv][D], e4m3 V only
  const int* heads;
  int Hq, Hkv, Nq, Nkv, nq, nk;
  float scaleLog2;
  Visibility vis;
  const int32_t* lut;
  const int32_t* validCount;
  const HeadParamsDev* params;
  uint8_t* pvSkipped;
  int* emptyRows;
};

template <typename T>
KParams<T> makeKParams(const Problem& pr, const AttnArgs& a) {
  const bool quant = a.numerics != core::Numerics::None;
  KParams<T> k{};
  k.q = quant ? static_cast<const void*>(a.quant.q8) : a.q;
  k.k = quant ? static_cast<const void*>(a.quant.k8) : a.k;
  k.v = quant ? a.quant.v : a.v;
  k.o = static_cast<T*>(a.o);
  k.qScale = a.quant.qScale;
  k.kScale = a.quant.kScale;
  k.vScale = a.numerics == core::Numerics::Int8Fp8 ? a.quant.vScale : nullptr;
  k.heads = pr.heads;
  k.Hq = pr.Hq;
  k.Hkv = pr.Hkv;
  k.Nq = pr.Nq;
  k.Nkv = pr.Nkv;
  k.nq = pr.nq;
  k.nk = pr.nk;
  k.scaleLog2 = a.scaleLog2;
  k.vis = Visibility::make(pr);
  k.lut = a.lut;
  k.validCount = a.validCount;
  k.params = a.params;
  k.pvSkipped = a.pvSkipped;
  k.emptyRows = a.emptyRows;
  return k;
}

}  // namespace sparge::cuda
