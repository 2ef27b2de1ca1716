#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "scoped_env.h"
#include "sparge/kernels/engine_factory.h"

namespace {

constexpr const char* kVar = "CUDA_DEVICE_MAX_CONNECTIONS";

TEST(PrepareCudaProcess, SetsTwoConnectionsWhenUnset) {
  sparge::test::ScopedEnv unset(kVar, std::nullopt);
  sparge::engines::prepareCudaProcess();
  const char* v = std::getenv(kVar);
  ASSERT_NE(v, nullptr);
  EXPECT_STREQ(v, "2");
}

TEST(PrepareCudaProcess, KeepsTheUsersValue) {
  sparge::test::ScopedEnv users(kVar, "8");
  sparge::engines::prepareCudaProcess();
  EXPECT_STREQ(std::getenv(kVar), "8");
}

}  // namespace
