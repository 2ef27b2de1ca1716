// Small text-formatting helpers for the CLI: aligned tables, numbers, byte sizes, the numerics header,
// the dense-run hint, timestamps.
#pragma once

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <ostream>
#include <string>
#include <vector>

#include "sparge/core/dense_hint.h"
#include "sparge/core/params.h"
#include "sparge/core/quant.h"

namespace sparge::cli {

// "geometry 128x64  numerics int8-fp8  target sm89": what every table header states about a run.
inline std::string numericsHeader(const core::Geometry& g, core::Numerics n) {
  return "geometry " + g.label() + "  numerics " + core::toString(n) + "  target " + core::targetLabel(g, n);
}

// The current UTC time as result files record it: "2026-11-29T02:52:04Z".
inline std::string utcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

inline std::string fmtNum(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

inline std::string fmtPct(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f%%", v * 100.0);
  return buf;
}

inline std::string fmtBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// "hint: <lead><why>. Try <fix> (<preset>)." — the dense-run hint as `sparge run` and `sparge tune` print it
// after their tables (the GUI's status line says the same sentence and offers the preset as a button).
inline std::string hintLine(const std::string& lead, const core::DenseHint& h) {
  std::string line = "hint: " + lead + h.why + ".";
  if (!h.fix.empty()) {
    line += " Try " + h.fix;
    if (h.preset) line += std::string(" (") + core::toString(*h.preset) + ")";
    line += ".";
  }
  return line;
}

// A plain aligned text table: first column left-aligned, the rest right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void print(std::ostream& out) const {
    std::vector<size_t> width;
    for (const auto& r : rows_)
      for (size_t c = 0; c < r.size(); ++c) {
        if (width.size() <= c) width.push_back(0);
        width[c] = std::max(width[c], displayWidth(r[c]));
      }
    for (size_t i = 0; i < rows_.size(); ++i) {
      const auto& r = rows_[i];
      for (size_t c = 0; c < r.size(); ++c) {
        const size_t pad = width[c] - displayWidth(r[c]);
        if (c == 0)
          out << r[c] << std::string(pad, ' ');
        else
          out << "  " << std::string(pad, ' ') << r[c];
      }
      out << '\n';
    }
  }

 private:
  // UTF-8 aware width (counts code points; our symbols are all single-width).
  static size_t displayWidth(const std::string& s) {
    size_t n = 0;
    for (unsigned char ch : s)
      if ((ch & 0xC0) != 0x80) ++n;
    return n;
  }
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace sparge::cli
