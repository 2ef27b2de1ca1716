// Summary statistics over repeated timings.
#include "sparge/profiler/stats.h"

#include <algorithm>
#include <cmath>

namespace sparge::prof {

Stats computeStats(std::vector<double> values) {
  Stats s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.count = int64_t(n);
  s.min = values.front();
  s.max = values.back();
  s.median = n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  double total = 0;
  for (double v : values) total += v;
  s.total = total;
  s.mean = total / double(n);
  double sq = 0;
  for (double v : values) sq += (v - s.mean) * (v - s.mean);
  s.stddev = std::sqrt(sq / double(n));
  return s;
}

}  // namespace sparge::prof
