// ScopedKernelFamily: sets SPARGE_ATTN_KERNEL (which Stage-2 kernel family the launcher picks) for a scope
// and restores the previous value; "" unsets it (the default family).
#pragma once

#include <optional>
#include <string>

#include "scoped_env.h"

namespace sparge::test {

class ScopedKernelFamily {
 public:
  explicit ScopedKernelFamily(const std::string& value)
      : env_("SPARGE_ATTN_KERNEL", value.empty() ? std::nullopt : std::optional<std::string>(value)) {}

 private:
  ScopedEnv env_;
};

}  // namespace sparge::test
