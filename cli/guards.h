// Checks every command makes before it computes: its outputs (writable, distinct, never one of its
// inputs) and the memory a run needs (--max-memory).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "sparge/core/types.h"

namespace sparge::cli {

// An input or output file of a command, with the option that named it ("--report", "capture").
struct NamedPath {
  std::string option;
  std::string path;
};

// Throws sparge::Error naming the option unless every non-empty output can be written (core::
// checkOutputPath: a name the file system takes, its folder exists and takes files, it is not a folder, not
// read-only; the formats were checked when the options were parsed), no two outputs are the same file, and
// no output is the same file as an input (compared by device and inode, so links and other spellings count).
void checkOutputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// The entries to run in the order given, each once (a repeated --entry would be exported twice).
std::vector<std::string> uniqueEntries(const std::vector<std::string>& names);

// --max-memory SIZE: the memory limit for runs instead of what the machine reports available.
void addMaxMemoryOption(CLI::App& cmd, std::string& value);
void applyMaxMemory(const std::string& value);

}  // namespace sparge::cli
