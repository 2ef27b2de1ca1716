// The head dims the CUDA kernels are compiled for, the one dispatch from a run-time D to a compile-time one,
// and the shared-memory check of launches that need more than the default 48 KB, so that every launcher
// refuses an unsupported head dim or device with the same clear message instead of running a wrong kernel.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace sparge::cuda {

// Q·Kᵀ head dim D (the kernels need Dv == D).
inline bool headDimSupported(long long d) {
  return d == 64 || d == 128 || d == 256;
}
inline constexpr const char* kHeadDimsText = "64, 128 or 256";

// Throws sparge::Error("<where>: head dim <d> is not supported by the CUDA kernels (64, 128 or 256); ...").
[[noreturn]] void throwUnsupportedHeadDim(long long d, const char* where);
inline void requireHeadDim(long long d, const char* where) {
  if (!headDimSupported(d)) throwUnsupportedHeadDim(d, where);
}

// Calls f(std::integral_constant<int, D>{}) for D = 64, 128 or 256; throws (as above) otherwise.
template <class F>
decltype(auto) withHeadDim(int d, const char* where, F&& f) {
  switch (d) {
    case 64:
      return std::forward<F>(f)(std::integral_constant<int, 64>{});
    case 128:
      return std::forward<F>(f)(std::integral_constant<int, 128>{});
    case 256:
      return std::forward<F>(f)(std::integral_constant<int, 256>{});
    default:
      throwUnsupportedHeadDim(d, where);
  }
}

// Throws sparge::Error when `bytes` of dynamic shared memory a CTA exceed what the current device allows
// (e.g. 99 KB on sm_86/sm_89, 163 KB on sm_80, 227 KB on sm_90), naming the kernel and the head dim.
void requireSharedMemory(size_t bytes, const char* kernel, int headDim);

}  // namespace sparge::cuda
