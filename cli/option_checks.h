// The CLI's option-validation layer: every value is checked while the command line is parsed, before any
// work (empty values, NaN, infinities, negative, overflowing or out-of-range numbers, unknown output
// formats), and each error names the option. The rules themselves are core/option_values.h, shared with
// the GUI's command line.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace sparge::cli {

// The formats of --report and --timings, chosen by the name's ending.
inline const std::vector<std::string> kReportFormats{".json", ".csv", ".md"};
inline const std::vector<std::string> kTimingFormats{".json", ".csv", ".trace.json"};

// Gives every option of `app` and of its subcommands that takes a value the checks its type needs: no
// empty value (an empty --theta would be 0, an empty --report or capture path would be ignored), real
// numbers finite, whole numbers in range and unsigned ones without a sign ("-1" would wrap). Call it once
// every option is defined; the options' own ranges come from the validators below.
void checkEveryOption(CLI::App& app);

// A real number in [lo, hi] / a whole number in [lo, hi] (the message says which range).
CLI::Validator realIn(double lo, double hi);
CLI::Validator integerIn(int64_t lo, int64_t hi);
// A size for --max-memory ("8G"; core::parseByteSize's rules).
CLI::Validator byteSize();
// An existing file (an input such as --params); "" is refused as empty.
CLI::Validator existingFile();
// An output whose format its name chooses: the name must end in one of `formats` (".json", ".csv" …).
CLI::Validator outputFormats(const std::vector<std::string>& formats);

// --heads: query heads to run, comma separated or repeated, each an index >= 0 (whether the entry has
// them is checked once it is open). run and tune take it alike.
CLI::Option* addHeadsOption(CLI::App& cmd, std::vector<int64_t>& heads, const std::string& help);
// --threads N (0 = one per hardware thread), N >= 0.
CLI::Option* addThreadsOption(CLI::App& cmd, int& threads, const std::string& help);
// The count a command uses for --threads `requested`: as given, or capped at what the machine runs
// (core::maxThreads(), said once on stderr); 0 stays 0 (one per hardware thread, or in an MPI job the
// rank's share of its host's cores).
int usableThreadsNoted(int requested);

}  // namespace sparge::cli
