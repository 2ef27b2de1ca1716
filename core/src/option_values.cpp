// Checked option values: the one set of rules for numbers, counts and output paths that the CLI's options
// and the GUI's command line share.
#include "sparge/core/option_values.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/core/names.h"

namespace sparge::core {
namespace {

std::string quoted(const std::string& text) {
  std::string q = "'";  // appended: "'" + std::string trips a GCC 12 -Wrestrict false positive
  q.append(shortForDisplay(text)).append("'");
  return q;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string rangeText(double lo, double hi) {
  if (lo == -DBL_MAX) return "at most " + number(hi);
  if (hi == DBL_MAX) return "at least " + number(lo);
  return "in [" + number(lo) + ", " + number(hi) + "]";
}

std::string rangeText(int64_t lo, int64_t hi) {
  if (lo == INT64_MIN) return "at most " + std::to_string(hi);
  if (hi == INT64_MAX) return "at least " + std::to_string(lo);
  return "in " + std::to_string(lo) + " … " + std::to_string(hi);
}

// Digits only, after an optional sign (strtoll alone would take spaces, "0x10" and "010" as octal).
bool isDecimal(const std::string& text, bool signAllowed) {
  size_t i = signAllowed && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string realProblem(const std::string& text, double lo, double hi) {
  if (text.empty()) return "the value is empty — give a number";
  if (std::isspace(static_cast<unsigned char>(text[0]))) return quoted(text) + " is not a number";
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return quoted(text) + " is not a number";
  if (std::isnan(v)) return quoted(text) + " is not a number (NaN) — give a finite number";
  if (std::isinf(v) || (errno == ERANGE && std::fabs(v) > 1))
    return quoted(text) + " is not a finite number (beyond double range) — give a finite number";
  if (v < lo || v > hi) return quoted(text) + " is out of range: the value must be " + rangeText(lo, hi);
  return "";
}

std::string integerProblem(const std::string& text, int64_t lo, int64_t hi) {
  if (text.empty()) return "the value is empty — give a whole number";
  if (!isDecimal(text, true)) return quoted(text) + " is not a whole number";
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v < lo || v > hi)
    return quoted(text) + " is out of range: the value must be " + rangeText(lo, hi);
  return "";
}

std::string unsignedProblem(const std::string& text) {
  if (text.empty()) return "the value is empty — give a whole number";
  if (text[0] == '-') return quoted(text) + " is negative — give a whole number >= 0";
  if (!isDecimal(text, true)) return quoted(text) + " is not a whole number";
  errno = 0;
  std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE)
    return quoted(text) + " is out of range: the value must be at most 18446744073709551615";
  return "";
}

double parseReal(const std::string& text, const std::string& option, double lo, double hi) {
  if (std::string p = realProblem(text, lo, hi); !p.empty()) throw Error(option, p);
  return std::strtod(text.c_str(), nullptr);
}

int64_t parseInteger(const std::string& text, const std::string& option, int64_t lo, int64_t hi) {
  if (std::string p = integerProblem(text, lo, hi); !p.empty()) throw Error(option, p);
  return std::strtoll(text.c_str(), nullptr, 10);
}

uint64_t parseUnsigned(const std::string& text, const std::string& option) {
  if (std::string p = unsignedProblem(text); !p.empty()) throw Error(option, p);
  return std::strtoull(text.c_str(), nullptr, 10);
}

std::string outputFormat(const std::string& path, const std::vector<std::string>& formats) {
  const std::string name = lower(path);
  std::string best;
  for (const std::string& f : formats) {
    const std::string suffix = lower(f);
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 && suffix.size() > best.size())
      best = suffix;
  }
  return best;
}

std::string formatList(const std::vector<std::string>& formats) {
  std::string list;
  for (size_t i = 0; i < formats.size(); ++i)
    list += (i == 0 ? "" : i + 1 == formats.size() ? " or " : ", ") + formats[i];
  return list;
}

void checkOutputPath(const std::string& path, const std::string& option,
                     const std::vector<std::string>& formats) {
  if (path.empty()) throw Error(option, "the path is empty — give a file name");
  const std::string where = option + " " + shortForDisplay(path);
  if (!formats.empty() && outputFormat(path, formats).empty())
    throw Error(where, "unknown format: the name must end in " + formatList(formats));
  checkWritableTarget(path, where);
}

}  // namespace sparge::core
