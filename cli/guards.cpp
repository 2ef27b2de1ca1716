// Output checks (before any compute) and the memory guard options of the CLI.
#include "guards.h"

#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <set>

#include "option_checks.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/error.h"
#include "sparge/core/memory_guard.h"
#include "sparge/core/names.h"
#include "sparge/core/option_values.h"

namespace sparge::cli {
namespace {

std::string label(const NamedPath& p) {
  return p.option + " " + core::shortForDisplay(p.path);
}

// The same file, however it is spelt: device and inode when it exists, else the canonical path.
std::string identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    return "inode " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return "path " + (ec ? path : p.string());
}

}  // namespace

void checkOutputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  std::map<std::string, const NamedPath*> inputIds, outputIds;
  for (const NamedPath& in : inputs)
    if (!in.path.empty()) inputIds.emplace(identity(in.path), &in);
  for (const NamedPath& out : outputs) {
    if (out.path.empty()) continue;
    const std::string id = identity(out.path);
    if (auto it = inputIds.find(id); it != inputIds.end())
      throw Error(label(out), "is the same file as the input " + label(*it->second) +
                                  " — an export never replaces its input; choose another path");
    if (auto it = outputIds.find(id); it != outputIds.end())
      throw Error(label(out),
                  "is the same file as " + label(*it->second) + " — give each output its own path");
    core::checkOutputPath(out.path, out.option);
    outputIds.emplace(id, &out);
  }
}

std::vector<std::string> uniqueEntries(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& n : names)
    if (seen.insert(n).second) out.push_back(n);
  return out;
}

void addMaxMemoryOption(CLI::App& cmd, std::string& value) {
  cmd.add_option("--max-memory", value,
                 "Memory a run may use (e.g. 8G), instead of what the machine reports available; runs that "
                 "need more stop before loading")
      ->check(byteSize());
}

void applyMaxMemory(const std::string& value) {
  if (!value.empty()) core::setMemoryLimit(core::parseByteSize(value, "--max-memory"));
}

}  // namespace sparge::cli
