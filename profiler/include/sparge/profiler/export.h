// Timing report exports: JSON, CSV and Chrome trace JSON, chosen by file extension and written atomically.
#pragma once

#include <string>

#include "sparge/profiler/report.h"

namespace sparge::prof {

enum class TimingFormat { Json, Csv, ChromeTrace };

// ".trace.json" -> ChromeTrace, ".json" -> Json, ".csv" -> Csv (case-insensitive); throws sparge::Error
// otherwise.
TimingFormat formatForPath(const std::string& path);

std::string toJson(const TimingReport& report);
// One row per stage statistic and per kernel statistic; leading "# " lines carry device, clock and source.
std::string toCsv(const TimingReport& report);
// {"traceEvents": [...], "displayTimeUnit": "ms", ...}: "X" events plus "M" metadata naming
// processes/threads.
std::string toChromeTrace(const TimingReport& report);

std::string render(const TimingReport& report, TimingFormat format);
// Picks the format from the extension and writes through core::writeTextAtomically.
void writeTimings(const TimingReport& report, const std::string& path);

}  // namespace sparge::prof
