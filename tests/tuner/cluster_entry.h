// Seeded in-memory entries with known attention structure for the tuner tests: keys form contiguous
// clusters, each query attends to one cluster (or, for a "diffuse" head, to nothing in particular).
#pragma once

#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "sparge/core/capture.h"
#include "sparge/core/half.h"

namespace sparge::tunertest {

struct ClusterSpec {
  std::string name = "c0";
  int64_t heads = 4;
  int64_t tokens = 1024;
  int64_t dim = 64;
  int64_t cluster = 256;  // keys per cluster (a multiple of both block sizes: whole K and Q blocks)
  // Per head: squared amplitude of the topic direction; 0 = diffuse head (no structure at all).
  // The logit gap between a query's own cluster and the others is about amp2 * scale = amp2 / 8.
  std::vector<double> amp2 = {64, 64, 40, 0};
  bool causal = false;
  std::optional<int64_t> layer;
  uint64_t seed = 7;
};

inline std::shared_ptr<const core::EntryData> makeClusterEntry(const ClusterSpec& s) {
  auto e = std::make_shared<core::EntryData>();
  core::EntryInfo& info = e->info;
  info.name = s.name;
  info.batch = 1;
  info.headsQ = info.headsKV = s.heads;
  info.tokensQ = info.tokensKV = s.tokens;
  info.headDim = info.headDimV = s.dim;
  info.dtype = core::DType::Float16;
  info.causal = s.causal;
  info.scale = 1.0 / std::sqrt(double(s.dim));
  info.layer = s.layer;
  const size_t n = size_t(s.heads * s.tokens * s.dim);
  e->q.resize(n);
  e->k.resize(n);
  e->v.resize(n);
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const int64_t clusters = s.tokens / s.cluster;
  for (int64_t h = 0; h < s.heads; ++h) {
    std::vector<std::vector<double>> topic(size_t(clusters), std::vector<double>(size_t(s.dim)));
    for (auto& t : topic) {
      double norm = 0;
      for (auto& x : t) {
        x = normal(rng);
        norm += x * x;
      }
      for (auto& x : t) x /= std::sqrt(norm);
    }
    const double a2 = h < int64_t(s.amp2.size()) ? s.amp2[size_t(h)] : 0.0;
    const double a = std::sqrt(a2);
    for (int64_t t = 0; t < s.tokens; ++t) {
      const int64_t c = t / s.cluster;
      // Queries of cluster c look at the keys of cluster (c + 1) mod C: not simply the local band.
      const int64_t target = (c + 1) % clusters;
      for (int64_t d = 0; d < s.dim; ++d) {
        const size_t i = size_t((h * s.tokens + t) * s.dim + d);
        const double qNoise = a2 > 0 ? normal(rng) : 0.05 * normal(rng);
        e->q[i] = core::roundToHalf(float(a * topic[size_t(target)][size_t(d)] + qNoise));
        e->k[i] = core::roundToHalf(float(a * topic[size_t(c)][size_t(d)] + normal(rng)));
        e->v[i] = core::roundToHalf(float(normal(rng)));
      }
    }
  }
  return e;
}

}  // namespace sparge::tunertest
