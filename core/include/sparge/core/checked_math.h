// Overflow-checked integer arithmetic for sizes computed from shapes and counts that files and options give.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace sparge::core {

// The product of non-negative factors, or nullopt when a factor is negative or the product exceeds `limit`.
inline std::optional<int64_t> checkedProduct(std::initializer_list<int64_t> factors,
                                             int64_t limit = INT64_MAX) {
  int64_t product = 1;
  for (int64_t f : factors)
    if (f < 0 || __builtin_mul_overflow(product, f, &product) || product > limit) return std::nullopt;
  return product;
}

// a + b for non-negative values, or nullopt when the sum exceeds `limit`.
inline std::optional<int64_t> checkedSum(int64_t a, int64_t b, int64_t limit = INT64_MAX) {
  int64_t sum = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &sum) || sum > limit) return std::nullopt;
  return sum;
}

}  // namespace sparge::core
