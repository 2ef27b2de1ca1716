// FloatBuffer: a std::vector<float> whose resize leaves new values unset, for buffers filled right after.
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace sparge::core {

// std::allocator, except that constructing an element without a value default-initialises it (for float:
// leaves it unset) instead of zeroing it. Loading an entry writes every value once; zeroing the buffer first
// was a whole extra pass over hundreds of MB, on one thread.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// resize(n) and FloatBuffer(n) leave the new values unset: write every one of them before reading.
// resize(n, 0.f) and assign() set values as std::vector's do.
using FloatBuffer = std::vector<float, DefaultInitAllocator<float>>;

}  // namespace sparge::core
