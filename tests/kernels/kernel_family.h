// ScopedKernelFamily: sets SPARGE_ATTN_KERNEL (which Stage-2 kernel family the launcher picks) for a scope
// and restores the previous value; "" unsets it (the default family).
#pragma once

#include <cstdlib>
#include <string>

namespace sparge::test {

class ScopedKernelFamily {
 public:
  explicit ScopedKernelFamily(const std::string& value) {
    if (const char* old = std::getenv("SPARGE_ATTN_KERNEL")) old_ = old, had_ = true;
    if (value.empty())
      unsetenv("SPARGE_ATTN_KERNEL");
    else
      setenv("SPARGE_ATTN_KERNEL", value.c_str(), 1);
  }
  ~ScopedKernelFamily() {
    if (had_)
      setenv("SPARGE_ATTN_KERNEL", old_.c_str(), 1);
    else
      unsetenv("SPARGE_ATTN_KERNEL");
  }
  ScopedKernelFamily(const ScopedKernelFamily&) = delete;
  ScopedKernelFamily& operator=(const ScopedKernelFamily&) = delete;

 private:
  bool had_ = false;
  std::string old_;
};

}  // namespace sparge::test
