#include "sparge/core/dense_hint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sparge::core {

const char* toString(Preset p) {
  switch (p) {
    case Preset::CdfDefaults:
      return "SpargeAttn CDF defaults";
    case Preset::TopkDefaults:
      return "top-k defaults";
    case Preset::FilterOff:
      return "similarity filter off";
    case Preset::Tuned:
      return "tuned values";
  }
  return "?";
}

HeadParams presetParams(Preset p, const HeadParams& current) {
  HeadParams out = current;
  out.dense = false;
  switch (p) {
    case Preset::CdfDefaults:
      out = HeadParams{};
      break;
    case Preset::TopkDefaults:
      out = HeadParams{};
      out.theta = -0.1;
      out.mode = SelectMode::TopK;
      out.topk = 0.5;
      break;
    case Preset::FilterOff:
      out.theta = -0.1;
      break;
    case Preset::Tuned:
      return current;
  }
  return out;
}

const char* presetOptions(Preset p) {
  switch (p) {
    case Preset::CdfDefaults:
      return "--theta 0.6 --tau 0.98 --lambda 50";
    case Preset::TopkDefaults:
      return "--theta=-0.1 --topk 0.5 --lambda 50";
    case Preset::FilterOff:
      return "--theta=-0.1";
    case Preset::Tuned:
      return "--params P.json";
  }
  return "";
}

namespace {
// What the runs' heads add up to, for judging why they are dense.
struct Tally {
  int64_t heads = 0, denseHeads = 0;
  SparsityCounts counts;
  int64_t forcedOnly = 0;  // selected blocks that only the self-similarity filter turned on
  int64_t kBlocks = 0, kNotSimilar = 0, qBlocks = 0, qNotSimilar = 0;
  std::vector<float> simK, simQ;  // finite self-similarities
  const HeadParams* first = nullptr;
  bool sameParams = true;
};

Tally tally(std::span<const EntryResult> results) {
  Tally t;
  constexpr uint8_t kForced = kReasonForcedRow | kReasonForcedCol;
  constexpr uint8_t kOther =
      kReasonSelected | kReasonSink | kReasonDenseHead | kReasonDiagonal | kReasonMethod;
  for (const auto& r : results) {
    for (const auto& h : r.heads) {
      ++t.heads;
      t.denseHeads += h.params.dense;
      t.counts += h.sparsity;
      if (!t.first) t.first = &h.params;
      t.sameParams = t.sameParams && h.params == *t.first;
      for (size_t i = 0; i < h.blockMask.size() && i < h.reasons.size(); ++i) {
        t.forcedOnly += h.blockMask[i] && (h.reasons[i] & kForced) && !(h.reasons[i] & kOther);
      }
      t.kBlocks += static_cast<int64_t>(h.similarK.size());
      t.qBlocks += static_cast<int64_t>(h.similarQ.size());
      for (uint8_t s : h.similarK) t.kNotSimilar += !s;
      for (uint8_t s : h.similarQ) t.qNotSimilar += !s;
      for (float s : h.selfSimK) {
        if (std::isfinite(s)) t.simK.push_back(s);
      }
      for (float s : h.selfSimQ) {
        if (std::isfinite(s)) t.simQ.push_back(s);
      }
    }
  }
  return t;
}

double median(std::vector<float> v) {
  if (v.empty()) return NAN;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

std::string format(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d);
  return buf;
}

// The forced rows or columns, whichever the filter forced more of.
DenseHint forcedHint(const Tally& t) {
  bool columns = double(t.kNotSimilar) * double(t.qBlocks) >= double(t.qNotSimilar) * double(t.kBlocks);
  const char* side = columns ? "K" : "Q";
  const char* lines = columns ? "column" : "row";
  int64_t notSimilar = columns ? t.kNotSimilar : t.qNotSimilar, blocks = columns ? t.kBlocks : t.qBlocks;
  double med = median(columns ? t.simK : t.simQ);
  std::string theta = t.sameParams ? format("θ %g", t.first->theta) : "the heads' θ";
  std::string medText = std::isfinite(med) ? format(" (median self-similarity %.2f)", med) : "";
  DenseHint h;
  if (notSimilar == blocks) {
    h.why = std::string("no ") + side + " block is self-similar at " + theta + medText + ": every " + lines +
            " is forced on";
  } else {
    h.why = format("%.0f of %.0f ", double(notSimilar), double(blocks)) + side +
            " blocks are not self-similar at " + theta + medText + ": their " + lines + "s are forced on";
  }
  if (t.first->theta >= 0 || !t.sameParams) {
    h.preset = Preset::FilterOff;
    h.fix = presetOptions(Preset::FilterOff);
  } else {
    h.why += " (a block with a zero row or a partial tail is never self-similar)";
  }
  return h;
}

DenseHint selectionHint(const Tally& t) {
  double kept = t.counts.validBlocks ? double(t.counts.selectedBlocks) / double(t.counts.validBlocks) : 1.0;
  DenseHint h;
  bool topk = t.first->mode == SelectMode::TopK;
  std::string what = !t.sameParams ? std::string("the selection")
                     : topk        ? format("top-k %g", t.first->topk)
                                   : format("τ %g", t.first->tau);
  h.why = what + format(" keeps %.0f %% of the valid blocks", 100 * kept) +
          (topk ? std::string(": almost every block of a row is kept")
                : std::string(
                      ": the pooled attention of each row is spread out, so its CDF reaches τ only near the "
                      "last blocks"));
  if (!topk || t.first->topk > 0.5) {
    h.preset = Preset::TopkDefaults;
    h.fix = presetOptions(Preset::TopkDefaults);
  }
  return h;
}
// A head whose quantization alone reaches the budget.
struct QuantHead {
  std::string where;  // entry or group
  int64_t head = 0;
  double l1Quant = 0;
};

// "l00 head 3 (0.541), l00 head 7 (0.32) and 8 more": the largest first.
std::string listHeads(std::vector<QuantHead> v) {
  constexpr size_t kListed = 6;
  std::stable_sort(v.begin(), v.end(), [](const QuantHead& a, const QuantHead& b) {
    return a.l1Quant > b.l1Quant || (std::isnan(a.l1Quant) && !std::isnan(b.l1Quant));
  });
  std::string s;
  for (size_t i = 0; i < v.size() && i < kListed; ++i)
    s +=
        (i ? ", " : "") + v[i].where + " head " + std::to_string(v[i].head) + format(" (%.3g)", v[i].l1Quant);
  if (v.size() > kListed) s += format(" and %.0f more", double(v.size() - kListed));
  return s;
}

// Heads of `results` that run quantized and whose quantization alone reaches `budget`.
std::optional<DenseHint> quantRunHint(std::span<const EntryResult> results, double budget) {
  std::vector<QuantHead> over;
  int64_t heads = 0;
  Numerics numerics = Numerics::None;
  for (const auto& r : results)
    for (const auto& h : r.heads) {
      ++heads;
      if (r.config.numericsFor(h.head) == Numerics::None || h.errorQuant.count == 0) continue;
      numerics = r.config.numericsFor(h.head);
      if (!(h.errorQuant.l1() < budget)) over.push_back({r.info.name, h.head, h.errorQuant.l1()});
    }
  if (over.empty()) return std::nullopt;
  DenseHint h;
  h.quantization = true;
  h.why = std::string("in ") + toString(numerics) + " quantization alone costs " +
          format("%.0f of %.0f heads at least the budget L1 %g", double(over.size()), double(heads), budget) +
          " (dense L1: " + listHeads(over) + "), so no θ, τ or λ can meet it there";
  h.fix = "sparge tune --exact-fallback head (those heads are then tuned and deployed in exact numerics)";
  return h;
}

}  // namespace

std::optional<DenseHint> denseRunHint(std::span<const EntryResult> results, std::optional<double> budget) {
  if (budget)
    if (auto q = quantRunHint(results, *budget)) return q;
  SparsityCounts all;
  for (const auto& r : results) {
    for (const auto& h : r.heads) all += h.sparsity;
  }
  // Most runs are sparse: they are judged from the counts alone, without a pass over every block.
  if (all.validBlocks == 0 || all.total() > kNearlyDense) return std::nullopt;
  Tally t = tally(results);
  if (t.heads == 0 || t.counts.validBlocks == 0 || t.counts.total() > kNearlyDense) return std::nullopt;
  if (t.denseHeads == t.heads) {
    DenseHint h{"every head is marked dense (is_sparse false): every valid block is computed",
                Preset::FilterOff, presetOptions(Preset::FilterOff)};
    return h;
  }
  double blocksPerHead = double(t.counts.validBlocks) / double(t.heads);
  if (blocksPerHead < 8) {
    return DenseHint{format("each head has only %.0f valid blocks: too few for a selection to leave any out",
                            blocksPerHead),
                     std::nullopt, ""};
  }
  if (t.forcedOnly * 2 >= t.counts.selectedBlocks) return forcedHint(t);
  return selectionHint(t);
}

std::optional<DenseHint> denseTuneHint(const TuneResult& result, bool causal) {
  const TuneOptions& o = result.options;
  std::vector<QuantHead> over;  // heads that stayed quantized although quantization alone reaches l1
  int64_t finished = 0, others = 0, othersDense = 0;
  for (const auto& g : result.groups)
    for (const auto& h : g.heads) {
      ++finished;
      if (o.numerics != Numerics::None && !h.exact && std::isfinite(h.l1Quant) && h.l1Quant >= o.l1) {
        over.push_back({g.name, h.head, h.l1Quant});
        continue;
      }
      ++others;
      othersDense += h.isSparse ? 0 : 1;
    }
  if (finished == 0) return std::nullopt;
  // No parameter can help when quantization alone costs the budget: the first cause, said first.
  if (!over.empty()) {
    DenseHint h;
    h.quantization = true;
    h.why = std::string("in ") + toString(o.numerics) + " quantization alone costs " +
            format("%.0f of %.0f heads at least l1 %g", double(over.size()), double(finished), o.l1) +
            " (dense L1: " + listHeads(over) +
            "), so no θ, τ or λ can meet the budget there; they are marked dense and still run quantized";
    h.fix =
        "--exact-fallback head (tunes them in exact numerics, to be deployed on a full-precision kernel), or "
        "raise --l1 and --l2 above their dense L1";
    return h;
  }
  if (others == 0 || othersDense < others) return std::nullopt;
  bool topk = o.mode == SelectMode::TopK;
  DenseHint h;
  h.why = std::string("every head came out dense: no θ and ") + (topk ? "top-k" : "τ") +
          format(" kept L1 below %g while leaving out more than %.0f %% of the blocks", o.l1,
                 100 * o.minSparsity);
  // The diagonal blocks (an extension) give every causal row its own key, as the sink gives it key 0.
  if (causal && !o.sink && !o.diagonal) {
    h.why +=
        "; without --sink, causal rows whose selected blocks all lie after them see no key at all "
        "(output 0), and that error alone can exceed the budget: --sink keeps K block 0 on for every row";
    h.fix = "--sink";
  } else if (!topk) {
    h.why += "; heads whose attention sits in very few blocks reach the CDF's τ with almost every block";
    h.fix = "--topk-mode";
  }
  return h;
}

std::string exactFallbackNote(const TuneResult& result) {
  const TuneOptions& o = result.options;
  std::vector<QuantHead> own;
  int64_t exact = 0, finished = 0;
  for (const auto& g : result.groups)
    for (const auto& h : g.heads) {
      ++finished;
      if (o.numerics == Numerics::None || !h.exact) continue;
      ++exact;
      // Heads kept by --resume have no decision: their own dense L1 says whether it was theirs.
      const auto cause = h.decision.exactCause;
      if (cause == TuneDecision::ExactCause::OwnQuantization ||
          (cause == TuneDecision::ExactCause::None && !(h.l1Quant < o.l1)))
        own.push_back({g.name, h.head, h.l1Quant});
    }
  if (exact == 0) return "";
  const size_t others = size_t(exact) - own.size();
  std::string s = "exact fallback (" + std::string(toString(o.exactFallback)) + "): " +
                  format("%.0f of %.0f heads tuned and recorded in exact numerics (\"numerics\": \"none\")",
                         double(exact), double(finished));
  if (!own.empty())
    s += std::string(": in ") + toString(o.numerics) +
         format(" quantization alone costs %.0f of them at least l1 %g (dense L1: ", double(own.size()), o.l1) +
         listHeads(own) + ")";
  if (others > 0 && !own.empty())
    s += format(", %.0f more share their ", double(others)) +
         (o.exactFallback == ExactFallback::Layer ? "entry or layer" : "entry");
  return s + "; deploy those heads on a full-precision attention kernel (SpargeAttn's kernels are always "
             "quantized)";
}

}  // namespace sparge::core
