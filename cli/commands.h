// The sparge CLI's subcommands: each file cli/cmd_<name>.cpp registers one subcommand.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace sparge::cli {

// Every subcommand registers itself and sets `action`, run after parsing. Actions return the exit
// code: 0 ok, 1 runtime error (message printed), 2 usage error.
using Action = std::function<int()>;

void registerInfo(CLI::App& app, Action& action);
void registerRun(CLI::App& app, Action& action);
void registerSynth(CLI::App& app, Action& action);
void registerTune(CLI::App& app, Action& action);
void registerBench(CLI::App& app, Action& action);  // without CUDA: explains that it needs a GPU build
void registerAnnotate(CLI::App& app, Action& action);
void registerCompare(CLI::App& app, Action& action);

// The capture opened when a command gets no file: the bundled real sample (see core/data_dir.h).
std::string defaultCapturePath();

}  // namespace sparge::cli
