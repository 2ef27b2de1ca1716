// Comparing variants of the method on one entry: tune each against the same budget, re-run with the tuned
// parameters, and collect per head the blocks' self-similarity and the sparsity reached.
#include "sparge/core/compare.h"

#include <cmath>
#include <limits>

#include "sparge/core/error.h"
#include "sparge/core/permutation.h"

namespace sparge::core {
namespace {

void addDefined(const std::vector<float>& values, double& sum, int64_t& count) {
  for (float v : values)
    if (std::isfinite(v)) {
      sum += v;
      ++count;
    }
}

// The run configuration that reproduces what the tuner measured, with each head's tuned parameters.
RunConfig configOf(const TuneOptions& o, const TunedGroup& g, int64_t headsQ) {
  RunConfig c;
  c.method = o.method;
  c.geometry = o.geometry;
  c.numerics = o.numerics;
  c.smoothK = o.smoothK;
  c.sink = o.sink;
  c.diagonal = o.diagonal;
  c.defaults = o.methodBase;
  c.defaults.mode = o.mode;
  c.defaults.dense = true;  // heads that were not tuned (--heads) run dense and are not reported
  c.perHead.assign(size_t(headsQ), c.defaults);
  for (const TunedHead& h : g.heads) c.perHead[size_t(h.head)] = h.params;
  return c;
}

// The index of the largest value (ties: the first) and whether another one equals it; none when no value
// is above 0 (no variant reached any sparsity: nothing to win).
std::pair<int, bool> best(const std::vector<double>& values) {
  int w = -1;
  for (size_t i = 0; i < values.size(); ++i)
    if (std::isfinite(values[i]) && values[i] > 0 && (w < 0 || values[i] > values[size_t(w)])) w = int(i);
  bool tie = false;
  for (size_t i = 0; w >= 0 && i < values.size(); ++i)
    tie = tie || (int(i) != w && values[i] == values[size_t(w)]);
  return {w, tie};
}

// The dense pass's Stage 2 time on `entry` (every valid block, no PV skip, the run's numerics), with the
// engine's caches cleared as for each variant's re-run.
double densePassMs(Engine& engine, const std::shared_ptr<const EntryData>& entry, const TuneOptions& o,
                   const TuneCallbacks& callbacks) {
  RunConfig c;
  c.geometry = o.geometry;
  c.numerics = o.numerics;
  c.smoothK = o.smoothK;
  c.defaults.dense = true;
  c.perHead.assign(size_t(entry->info.headsQ), c.defaults);
  RunOptions ro;
  ro.heads = o.heads;
  ro.cancel = callbacks.cancel;
  ro.computeError = false;
  engine.setEntry(entry);
  return engine.run(c, ro).times.sparseMs;
}

// Tunes one variant and re-runs it; fills its slot of every head and of the entry.
void runVariant(Engine& engine, const std::shared_ptr<const EntryData>& permuted, size_t slot,
                const TuneOptions& options, const TuneCallbacks& callbacks, CompareEntry& out) {
  const TuneResult tuned = tuneEntry(engine, permuted, options, callbacks);
  if (tuned.cancelled) throw Cancelled();
  const TunedGroup& g = tuned.groups.at(0);
  RunOptions ro;
  ro.heads = options.heads;
  ro.cancel = callbacks.cancel;
  engine.setEntry(permuted);
  EntryResult run = engine.run(configOf(options, g, permuted->info.headsQ), ro);
  for (CompareHead& ch : out.heads) {
    VariantHead& vh = ch.variants[slot];
    if (const TunedHead* th = g.find(ch.head)) vh.tuned = *th;
    for (const HeadResult& h : run.heads) {
      if (h.head != ch.head) continue;
      vh.similarity.add(h);
      out.similarity[slot].add(h);
      vh.reached += h.sparsity;
      vh.error += h.error;
    }
  }
  out.runs[slot] = std::move(run);
}

}  // namespace

double SelfSimilarity::meanQ() const {
  return blocksQ ? sumQ / double(blocksQ) : std::numeric_limits<double>::quiet_NaN();
}
double SelfSimilarity::meanK() const {
  return blocksK ? sumK / double(blocksK) : std::numeric_limits<double>::quiet_NaN();
}
void SelfSimilarity::add(const HeadResult& h) {
  addDefined(h.selfSimQ, sumQ, blocksQ);
  addDefined(h.selfSimK, sumK, blocksK);
}

double CompareEntry::stage1Share(size_t variant) const {
  return denseMs > 0 && variant < runs.size() ? runs[variant].times.predictMs / denseMs
                                              : std::numeric_limits<double>::quiet_NaN();
}

std::vector<CompareVariant> compareVariants(const std::vector<Permutation>& permutes,
                                            const std::vector<Method>& methods) {
  std::vector<CompareVariant> out;
  for (Permutation p : permutes)
    for (Method m : methods) {
      std::string label = permutes.size() > 1 || methods.size() == 1 ? toString(p) : "";
      if (methods.size() > 1) label += (label.empty() ? "" : " + ") + std::string(toString(m));
      out.push_back({label, p, m});
    }
  return out;
}

CompareEntry compareEntry(Engine& engine, std::shared_ptr<const EntryData> entry,
                          const std::vector<CompareVariant>& variants, const TuneOptions& options,
                          const TuneCallbacks& callbacks) {
  if (variants.empty()) throw Error("compare", "no variants to compare");
  for (const CompareVariant& v : variants)
    if (std::string p = permutationProblem(entry->info, v.permute); !p.empty()) throw Error("--permute", p);
  CompareEntry out;
  out.info = entry->info;
  out.runs.resize(variants.size());
  out.similarity.resize(variants.size());
  for (int64_t h = 0; h < entry->info.headsQ; ++h) {
    bool wanted = options.heads.empty();
    for (int64_t x : options.heads) wanted = wanted || x == h;
    if (!wanted) continue;
    CompareHead ch;
    ch.head = h;
    ch.variants.resize(variants.size());
    out.heads.push_back(std::move(ch));
  }
  PermutedEntries permuted(entry);
  for (size_t i = 0; i < variants.size(); ++i) {
    TuneOptions o = options;
    o.method = variants[i].method;
    runVariant(engine, permuted.get(variants[i].permute, "--permute"), i, o, callbacks, out);
  }
  out.denseMs = densePassMs(engine, entry, options, callbacks);
  out.headsWon.assign(variants.size(), 0);
  for (CompareHead& ch : out.heads) {
    std::vector<double> total;
    for (const VariantHead& v : ch.variants) total.push_back(v.reached.validBlocks ? v.reached.total() : NAN);
    std::tie(ch.winner, ch.tie) = best(total);
    for (size_t i = 0; ch.winner >= 0 && i < total.size(); ++i)
      out.headsWon[i] += total[i] == total[size_t(ch.winner)] ? 1 : 0;
  }
  std::vector<double> total;
  for (const EntryResult& r : out.runs) {
    SparsityCounts sum;
    for (const HeadResult& h : r.heads)
      for (const CompareHead& ch : out.heads)
        if (ch.head == h.head) sum += h.sparsity;
    total.push_back(sum.validBlocks ? sum.total() : NAN);
  }
  std::tie(out.winner, out.tie) = best(total);
  return out;
}

}  // namespace sparge::core
