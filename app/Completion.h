// Shell completion for `stagescope`, generated from the command-line definitions themselves
// (app/CommandLine.h and the commands main.cpp adds), so it never drifts from them:
//   source <(stagescope completion bash)      # bash
//   source <(stagescope completion zsh)       # zsh (through bashcompinit)
// Completes command names, each command's options, and file names for arguments and options
// that take a value.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace stagescope::app {

// The script for `shell` ("bash" or "zsh").  Throws std::invalid_argument for another shell.
std::string completionScript(const CLI::App& cli, const std::string& shell);

}  // namespace stagescope::app
