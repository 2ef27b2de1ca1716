// Helpers shared by the core tests: a scratch folder per test, "expect this error message", random values.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "sparge/core/error.h"

namespace sparge::test {

// A fresh folder under the system temp folder, removed (with everything in it) at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("sparge_core_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add,
                                 ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Expects `fn` to throw sparge::Error whose message contains every string in `parts`.
template <class Fn>
void expectError(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no sparge::Error thrown";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    if (std::getenv("SPARGE_SHOW_ERRORS")) std::printf("  message: %s\n", msg.c_str());
  }
}

// n values drawn from N(0, sd²) with `seed`.
inline std::vector<float> normalValues(size_t n, uint64_t seed, float sd = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace sparge::test
