// The kernel parameters shared by every Stage-2 attention kernel family (sm80 mma.sync, sm90 wgmma), and
// their construction from the launcher's Problem and AttnArgs, so the families cannot drift apart.
#pragma once

#include <cstdint>

#include "launch.h"

namespace sparge::cuda {

template <typename T>
struct KParams {
  const T* q;
  const T* k;
  const T* v;
  T* o;
  const int* heads;
  int Hq, Hkv, Nq, Nkv, nq, nk;
  float scaleLog2;
  int causal;
  const int32_t* lut;
  const int32_t* validCount;
  const HeadParamsDev* params;
  uint8_t* pvSkipped;
  int* emptyRows;
};

template <typename T>
KParams<T> makeKParams(const Problem& pr, const AttnArgs& a) {
  return KParams<T>{static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
                    static_cast<T*>(a.o),       pr.heads,                     pr.Hq,
                    pr.Hkv,                     pr.Nq,                        pr.Nkv,
                    pr.nq,                      pr.nk,                        a.scaleLog2,
                    pr.causal ? 1 : 0,          a.lut,                        a.validCount,
                    a.params,                   a.pvSkipped,                  a.emptyRows};
}

}  // namespace sparge::cuda
