// File: devlet/common/flags.h
//
// Command-line flags for devlet's binaries, on CLI11. Every flag also reads an environment
// variable named after it in UPPER_SNAKE case (`--node-name` <- NODE_NAME), the convention of the
// upstream DRA drivers; an explicit flag wins over the environment.
//
//   CLI::App app{"devlet-node"};
//   std::string node_name;
//   devlet::flags::AddFlag(app, "--node-name", node_name, "Name of this node");
//   if (std::optional<int> exit_code = devlet::flags::ParseCommandLine(app, argc, argv)) {
//     return *exit_code;  // --help, or a bad flag
//   }
//
// Only binaries include this header (CLI11 is a large header-only library).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "devlet/common/log.h"

namespace devlet::flags {

// EnvName returns the environment variable for a flag: "--node-name" -> "NODE_NAME".
std::string EnvName(std::string_view flag);

// AddFlag adds `--name` bound to `value`, also read from EnvName(name).
template <typename T>
CLI::Option* AddFlag(CLI::App& app, const std::string& name, T& value, const std::string& help) {
  return app.add_option(name, value, help)->envname(EnvName(name))->capture_default_str();
}

// AddLoggingFlags adds `-v/--v` (V) and `--logging-format` (LOGGING_FORMAT, text|json).
void AddLoggingFlags(CLI::App& app, log::Options& options);

// Parse parses argv into `app`. Go-style single-dash long flags (`-v=4`, `-kubeconfig x`), which
// Kubernetes users type out of habit, are accepted as their double-dash forms. Throws CLI11's
// parse exceptions; use it inside CLI11_PARSE-like handling (`app.exit(e)`).
void Parse(CLI::App& app, int argc, const char* const* argv);

// ParseCommandLine is a binary's whole flag handling after its own flags are added: it adds the
// logging flags (AddLoggingFlags, so they come last in --help), parses argv (Parse), and on
// success configures logging from them (log::Configure). It returns std::nullopt to go on, or the
// code main should exit with: 0 after --help (printed to stdout), CLI11's non-zero code after a
// bad or missing flag (the message and a pointer to --help on stderr). The logging flags are bound
// to storage that ends with this call: parse `app` once.
std::optional<int> ParseCommandLine(CLI::App& app, int argc, const char* const* argv);

// ParseFeatureGates parses "A=true,B=false" (Kubernetes --feature-gates syntax). Whitespace around
// entries is ignored; a repeated gate takes the last value; anything else is InvalidArgument.
absl::StatusOr<std::map<std::string, bool>> ParseFeatureGates(std::string_view text);

}  // namespace devlet::flags
