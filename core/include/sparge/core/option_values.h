// Option values from a command line (the CLI's and the GUI's), checked before any work: numbers, counts and
// output paths. Every error is a sparge::Error naming the option.
#pragma once

#include <cfloat>
#include <cstdint>
#include <string>
#include <vector>

namespace sparge::core {

// The problem of a value, "" when there is none (for validators that return a message). The text must be
// the whole value: "" (empty), "3x", " 3", NaN, ±inf and numbers beyond double range ("1e400") are refused.
std::string realProblem(const std::string& text, double lo = -DBL_MAX, double hi = DBL_MAX);
// A decimal integer in [lo, hi] ("1.5", "0x10", "1e3" and values beyond int64 are refused).
std::string integerProblem(const std::string& text, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
// A decimal integer in [0, 2^64 − 1] written without a sign: "-1" is refused instead of wrapping.
std::string unsignedProblem(const std::string& text);

// The value, or sparge::Error(option, problem).
double parseReal(const std::string& text, const std::string& option, double lo = -DBL_MAX,
                 double hi = DBL_MAX);
int64_t parseInteger(const std::string& text, const std::string& option, int64_t lo = INT64_MIN,
                     int64_t hi = INT64_MAX);
uint64_t parseUnsigned(const std::string& text, const std::string& option);

// The format of `path` among `formats` (suffixes such as ".json", ".trace.json"; the longest that matches,
// compared without case), or "" when none matches.
std::string outputFormat(const std::string& path, const std::vector<std::string>& formats);
// "one of .json, .csv or .md": the formats as a message lists them.
std::string formatList(const std::vector<std::string>& formats);

// An output path, before any work: not empty, its name ending in one of `formats` when formats are given,
// and writable as core::checkWritableTarget checks it (a name the file system takes, an existing folder
// that takes files, not a folder, not read-only, not an open input). Throws sparge::Error naming `option`
// and the path (shortened for display).
void checkOutputPath(const std::string& path, const std::string& option,
                     const std::vector<std::string>& formats = {});

}  // namespace sparge::core
