// Option checks of the CLI: CLI11 validators over the shared rules of core/option_values.h.
#include "option_checks.h"

#include <cstdio>

#include "sparge/core/memory_guard.h"
#include "sparge/core/names.h"
#include "sparge/core/option_values.h"
#include "sparge/core/parallel.h"

namespace sparge::cli {
namespace {

// The problem of one value of an option whose C++ type CLI11 names `type` ("FLOAT", "INT", "UINT", "TEXT").
std::string typeProblem(const std::string& type, const std::string& value) {
  if (type == "FLOAT") return core::realProblem(value);
  if (type == "INT") return core::integerProblem(value);
  if (type == "UINT") return core::unsignedProblem(value);
  if (value.empty()) return "the value is empty — give one (or leave the option out)";
  return "";
}

void checkOptions(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size() == 0) continue;  // flags take no value
    // get_type_name() appends the validators' descriptions ("INT:INT in [1 - 100000]").
    std::string type = opt->get_type_name();
    type = type.substr(0, type.find(':'));
    opt->check(
        CLI::Validator([type](std::string& value) { return typeProblem(type, value); }, "", "value check"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) checkOptions(*sub);
}

}  // namespace

void checkEveryOption(CLI::App& app) {
  checkOptions(app);
}

CLI::Validator realIn(double lo, double hi) {
  return CLI::Validator([lo, hi](std::string& value) { return core::realProblem(value, lo, hi); }, "",
                        "range");
}

CLI::Validator integerIn(int64_t lo, int64_t hi) {
  return CLI::Validator([lo, hi](std::string& value) { return core::integerProblem(value, lo, hi); }, "",
                        "range");
}

CLI::Validator byteSize() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          core::parseByteSize(value, "");
        } catch (const std::exception& e) {
          return e.what();
        }
        return "";
      },
      "SIZE", "size");
}

CLI::Validator outputFormats(const std::vector<std::string>& formats) {
  return CLI::Validator(
      [formats](std::string& value) -> std::string {
        if (value.empty() || !core::outputFormat(value, formats).empty()) return "";
        return "unknown format of '" + core::shortForDisplay(value) + "': the name must end in " +
               core::formatList(formats);
      },
      "", "format");
}

CLI::Validator existingFile() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (value.empty()) return "the value is empty — give a file";
        return CLI::ExistingFile(value);
      },
      "FILE", "existing file");
}

CLI::Option* addHeadsOption(CLI::App& cmd, std::vector<int64_t>& heads, const std::string& help) {
  return cmd.add_option("--heads", heads, help + " (comma separated, e.g. 0,1,5)")
      ->delimiter(',')
      ->check(integerIn(0, core::kMaxDimension - 1));
}

CLI::Option* addThreadsOption(CLI::App& cmd, int& threads, const std::string& help) {
  return cmd.add_option("--threads", threads, help + " (0 = one per hardware thread)")
      ->check(integerIn(0, 1 << 20))
      ->capture_default_str();
}

int usableThreadsNoted(int requested) {
  if (requested <= 0) return 0;  // left to the engine, or to a job's placement (ranks share the cores)
  const int usable = core::usableThreads(requested);
  if (requested > usable)
    std::fprintf(stderr, "note: --threads %d capped at %d (%d per hardware thread of this machine's %d)\n",
                 requested, usable, core::kThreadsPerHardwareThread, core::hardwareThreads());
  return usable;
}

}  // namespace sparge::cli
