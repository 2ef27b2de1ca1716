#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "sparge/kernels/engine_factory.h"

namespace {

constexpr const char* kVar = "CUDA_DEVICE_MAX_CONNECTIONS";

// Restores the variable as the test found it.
class SavedVariable {
 public:
  SavedVariable() {
    if (const char* v = std::getenv(kVar)) saved_ = v;
  }
  ~SavedVariable() {
    if (saved_)
      setenv(kVar, saved_->c_str(), 1);
    else
      unsetenv(kVar);
  }

 private:
  std::optional<std::string> saved_;
};

TEST(PrepareCudaProcess, SetsTwoConnectionsWhenUnset) {
  SavedVariable keep;
  unsetenv(kVar);
  sparge::engines::prepareCudaProcess();
  const char* v = std::getenv(kVar);
  ASSERT_NE(v, nullptr);
  EXPECT_STREQ(v, "2");
}

TEST(PrepareCudaProcess, KeepsTheUsersValue) {
  SavedVariable keep;
  setenv(kVar, "8", 1);
  sparge::engines::prepareCudaProcess();
  EXPECT_STREQ(std::getenv(kVar), "8");
}

}  // namespace
